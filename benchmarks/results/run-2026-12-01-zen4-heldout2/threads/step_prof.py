"""Time the engine's steps on the Go explanation prompt (the held-out explain_go), plain decoding and n-gram lookup;
then cProfile the plain run: python step_prof.py"""
import sys, time, cProfile, pstats, io
sys.path.insert(0, "benchmarks/results/run-2026-11-28-spr-heldout")
from tasks import tasks, prompt
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
engine, _ = LLMEngine.from_config(EngineConfig(model="default", dtype="auto"))
tok = engine.tokenizer
instr, f, style = tasks["explain_go"]
ids = tok.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
print("prompt tokens", len(ids))
def run(method, n=300):
    req = GenerationRequest(ids, n, SamplingParams(temperature=0.0), SpeculationParams(method=method), ignore_eos=True)
    engine.add_request(req)
    steps, t0, first = 0, None, None
    times = []
    while engine.has_unfinished():
        t = time.perf_counter()
        engine.step()
        times.append(time.perf_counter() - t)
    return times
for method in ("none", "ngram", "none"):
    times = run(method)
    dec = times[2:]
    print(f"{method:6s} steps {len(times)}: prefill {sum(times[:1]):.2f} s, decode steps median {1000 * sorted(dec)[len(dec)//2]:.1f} ms, mean {1000 * sum(dec) / len(dec):.1f} ms")
pr = cProfile.Profile(); pr.enable(); run("none", 150); pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(35); print(s.getvalue()[:6000])
