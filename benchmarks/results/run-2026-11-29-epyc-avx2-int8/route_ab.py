"""Plain decoding of the 0.5B: int8 route (AVX2 kernel) against the bf16 route, two engines in one process,
alternating; and n-gram on a copy task."""
import time, sys, random, statistics
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
engines = {}
for arm in ("int8", "bf16"):
    engines[arm], _ = LLMEngine.from_config(EngineConfig(int8_linears=(arm == "int8"), measure_cost_curve=False))
    print(arm, "int8 layers", engines[arm].runner.int8_layers, flush=True)
rng = random.Random(0)
prompt = [rng.randrange(1000, 20000) for _ in range(300)]
def run(eng, spec, max_tokens):
    req = GenerationRequest(prompt_ids=prompt, max_tokens=max_tokens, sampling=SamplingParams(temperature=0), speculation=spec)
    t = time.perf_counter(); out = eng.generate([req]); return time.perf_counter() - t, out
for eng in engines.values():
    run(eng, SpeculationParams(method="none"), 1)
res = {a: [] for a in engines}; outs = {}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4):
    for arm in (("int8", "bf16") if r % 2 == 0 else ("bf16", "int8")):
        t, out = run(engines[arm], SpeculationParams(method="none"), 48)
        res[arm].append(t); outs.setdefault(arm, [t for o in list(out.values())[0] for t in o.new_token_ids])
ratios = [a / b for a, b in zip(res["int8"], res["bf16"])]
print(f"plain 48 tokens: int8 {[round(x,2) for x in res['int8']]} bf16 {[round(x,2) for x in res['bf16']]} median ratio {statistics.median(ratios):.3f}", flush=True)
print("int8 out", outs["int8"][:20]); print("bf16 out", outs["bf16"][:20])
