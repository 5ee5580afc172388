"""Whole passes of the 0.5B with the output head's int8 argmax copy against the exact head, alternating pass by pass
in one process (median of 8 and the median paired ratio), then a real greedy request both ways (same tokens).

    .venv/bin/python argmax_pass_ab.py                                  # the default mode here (bf16, exact, AMX)
    FORETELL_CPU_AMX=0 .venv/bin/python argmax_pass_ab.py exact         # bf16 exact mode without AMX
    FORETELL_CPU_AMX=0 .venv/bin/python argmax_pass_ab.py exact fp32    # fp32 exact mode (the EPYC's mode)
"""
import statistics, sys, time, torch
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False, exact=True if "exact" in sys.argv else None,
                                                dtype="float32" if "fp32" in sys.argv else "auto"))
runner = engine.runner
head = runner.model.get_output_embeddings()
copy = head.argmax
print("argmax head:", copy is not None, "int8 copy MB", copy.nbytes / 2**20 if copy else None, flush=True)
gen = torch.Generator().manual_seed(0)
kv = SeqKV(runner.kv_shape, 2200, 2200)
toks = torch.randint(0, runner.vocab_size, (2048,), generator=gen).tolist()
for i in range(0, 2048, 512):
    runner.forward([Segment(kv, toks[i:i+512], 1)], reuse_logits=True)
import numpy as np
orig = type(copy).logits
cands = {}
def spy(self, x, weight, out=None):
    r = orig(self, x, weight, out)
    cands.setdefault(kv.length, []).append(-1 if r is None else int(sum((r.reshape(-1, r.shape[-1])[i] == r.reshape(-1, r.shape[-1])[i].max()).sum() for i in range(1))))
    return r
res = {}
for rnd in range(9):
    for L in (256, 2048):
        for n in (1, 5, 17):
            for name, h in (("exact", None), ("int8", copy)):
                head.argmax = h
                kv.length = L
                dt = _timed_pass(runner, kv, n, runner.vocab_size, gen)[0]
                if rnd: res.setdefault((L, n, name), []).append(dt)
head.argmax = copy
for L in (256, 2048):
    print(L, "  ".join(f"n={n}: exact {statistics.median(res[(L, n, 'exact')])*1e3:.1f} int8 {statistics.median(res[(L, n, 'int8')])*1e3:.1f} ms "
                       f"(paired {statistics.median(a / b for a, b in zip(res[(L, n, 'int8')], res[(L, n, 'exact')])):.3f})" for n in (1, 5, 17)), flush=True)
snake = open("src/foretell/bench/data/snake.py").read()
tok = engine.tokenizer
prompt = tok.encode(tok.apply_chat_template([{"role": "user", "content": "Add a docstring to every method. Reply with the full file.\n\n```python\n" + snake + "```"}], add_generation_prompt=True, tokenize=False))
outs = {}
for name, h in (("exact", None), ("int8", copy), ("exact again", None)):
    head.argmax = h
    for pred in (None, tok.encode(snake)):
        r = GenerationRequest(prompt_ids=prompt, max_tokens=300, sampling=SamplingParams(temperature=0.0),
                              speculation=SpeculationParams(prediction=None if pred is None else tuple(pred)))
        t0 = time.perf_counter()
        chunks = engine.generate([r])[r.request_id]
        outs[(name, pred is None)] = [t for c in chunks for t in c.new_token_ids]
        print(name, "prediction" if pred else "n-gram", len(outs[(name, pred is None)]), f"{time.perf_counter() - t0:.2f} s", chunks[-1].stats.forward_passes, "passes", flush=True)
print("same tokens:", len({tuple(v) for v in outs.values()}) == 1)
