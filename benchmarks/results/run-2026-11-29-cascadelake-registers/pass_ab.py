"""Whole passes of the 0.5B: p8_tile for short passes (knob 16) against the buffer (0), alternating in one process."""
import time, sys, random, statistics, ctypes
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.engine import cpu_gemm
eng, _ = LLMEngine.from_config(EngineConfig())
gemm = cpu_gemm.load()
rng = random.Random(0)
prompt = [rng.randrange(1000, 20000) for _ in range(300)]
def run(spec, max_tokens):
    req = GenerationRequest(prompt_ids=prompt, max_tokens=max_tokens, sampling=SamplingParams(temperature=0), speculation=spec)
    t = time.perf_counter(); out = eng.generate([req]); return time.perf_counter() - t, out
# warm the prefix cache so both arms decode only
run(SpeculationParams(method="none"), 1)
import sys
spec = SpeculationParams(method="none") if sys.argv[1] == "none" else SpeculationParams(method="ngram", k_max=int(sys.argv[1]))
res = {0: [], 16: []}; outs = {}
for r in range(6):
    for arm in ((0, 16) if r % 2 == 0 else (16, 0)):
        gemm.p8_fused_rows = arm
        t, out = run(spec, 48)
        res[arm].append(t); outs.setdefault(arm, [t for o in list(out.values())[0] for t in o.new_token_ids])
ratios = [b / a for a, b in zip(res[0], res[16])]
print(f"plain 48 tokens: buffer {[round(x,2) for x in res[0]]} registers {[round(x,2) for x in res[16]]} median ratio {statistics.median(ratios):.3f}  same output {outs[0] == outs[16]}", flush=True)
gemm.p8_fused_rows = 16
