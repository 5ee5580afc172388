"""Plain decoding and n-gram runs of real prompts, the head's int8 argmax copy on and off, alternating (0.5B)."""
import statistics, time, torch
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=True))
head = engine.runner.model.get_output_embeddings()
copy = head.argmax
tok = engine.tokenizer
snake = open("src/foretell/bench/data/snake.py").read()
def chat(text):
    return tok.encode(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False))
cases = {"open": (chat("Explain how a hash map handles collisions, with a short Python example."), "none", None),
         "docstrings": (chat("Add a docstring to every method. Reply with the full file.\n\n```python\n" + snake + "```"), "ngram", None),
         "port": (chat("Port this file to JavaScript. Reply with the full file.\n\n```python\n" + snake + "```"), "prediction", tok.encode(snake))}
times, outs = {}, {}
for rnd in range(4):
    for case, (prompt, method, pred) in cases.items():
        for name, h in (("exact", None), ("int8", copy)) if rnd % 2 == 0 else (("int8", copy), ("exact", None)):
            head.argmax = h
            r = GenerationRequest(prompt_ids=prompt, max_tokens=160, sampling=SamplingParams(temperature=0.0),
                                  speculation=SpeculationParams(method=method, prediction=None if pred is None else tuple(pred)))
            t0 = time.perf_counter()
            chunks = engine.generate([r])[r.request_id]
            dt = time.perf_counter() - t0
            toks = [t for c in chunks for t in c.new_token_ids]
            outs.setdefault(case, set()).add(tuple(toks))
            if rnd: times.setdefault((case, name), []).append(dt)
            if rnd == 0 and name == "exact": print(case, len(toks), "tokens", chunks[-1].stats.forward_passes, "passes", flush=True)
for case in cases:
    e, i = times[(case, "exact")], times[(case, "int8")]
    print(f"{case}: exact {statistics.median(e):.2f} s, int8 {statistics.median(i):.2f} s, paired {statistics.median(b / a for a, b in zip(e, i)):.3f}, outputs identical: {len(outs[case]) == 1}")
