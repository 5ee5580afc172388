"""Real requests with exact mode's layer glue (GlueRMSNorm, GlueMLP) on and off, alternating in one engine (0.5B):
plain decoding, n-gram lookup over a prompt holding the file, a prediction (port, rewrite with prefill included),
median wall time, the paired ratio, and whether the tokens are the same both ways. FORETELL_AB_DTYPE (default auto)
sets the model's dtype (run-2026-11-28-spr-fp32-glue: float32 with FORETELL_CPU_AMX=0)."""
import os, statistics, sys, time
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False, dtype=os.environ.get("FORETELL_AB_DTYPE", "auto")))
rows = engine.runner._exact_rows
tok = engine.tokenizer
snake = open("src/foretell/bench/data/snake.py").read()
def chat(text):
    return tok.encode(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False))
cases = {"open question, plain": (chat("Explain how a hash map handles collisions, with a short Python example."), "none", None, 160),
         "docstrings, n-gram": (chat("Add a docstring to every method. Reply with the full file.\n\n```python\n" + snake + "```"), "ngram", None, 300),
         "rename, prediction": (chat("Rename the class Snake to Serpent. Reply with the full file.\n\n```python\n" + snake + "```"), "prediction", tok.encode(snake), 900),
         "port, prediction": (chat("Port this file to JavaScript. Reply with the full file.\n\n```python\n" + snake + "```"), "prediction", tok.encode(snake), 200),
         "prefill only (908 tokens)": (chat("Add a docstring to every method. Reply with the full file.\n\n```python\n" + snake + "```"), "none", None, 1)}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
times, outs = {}, {}
for rnd in range(rounds + 1):
    for case, (prompt, method, pred, n) in cases.items():
        for glue in ((False, True) if rnd % 2 == 0 else (True, False)):
            rows.glue = glue
            r = GenerationRequest(prompt_ids=prompt, max_tokens=n, sampling=SamplingParams(temperature=0.0),
                                  speculation=SpeculationParams(method=method, prediction=None if pred is None else tuple(pred)))
            t0 = time.perf_counter()
            chunks = engine.generate([r])[r.request_id]
            dt = time.perf_counter() - t0
            toks = [t for c in chunks for t in c.new_token_ids]
            outs.setdefault(case, set()).add(tuple(toks))
            if rnd: times.setdefault((case, glue), []).append(dt)
            if rnd == 0 and not glue: print(case, len(prompt), "prompt tokens", len(toks), "tokens", chunks[-1].stats.forward_passes, "passes", flush=True)
for case in cases:
    off, on = times[(case, False)], times[(case, True)]
    same = len(outs[case]) == 1
    print(f"{case}: off {statistics.median(off):.2f} s, on {statistics.median(on):.2f} s, paired {statistics.median(b / a for a, b in zip(off, on)):.3f}, same tokens on and off: {same}" + ("" if same else " (each mode gives its own tokens every time: a near-tie that the glue's last bits flip)"))
