"""Whole passes of the 0.5B (fp32 exact mode) with the int8 route on and off, alternating in one process (the
layers' int8 blocks and groups set aside for 'off'): n tokens after CTX cached ones, 6 rounds, median paired ratio.

    python passes_ab.py [CTX] [sizes, e.g. 1,4,16,64,128]
"""
import time, sys, torch, statistics
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.engine.runner import ExactKernelLinear, Segment
from foretell.engine.kv_cache import SeqKV
eng, name = LLMEngine.from_config(EngineConfig(int8_linears=True, measure_cost_curve=False))
mods = [m for m in eng.runner.model.modules() if isinstance(m, ExactKernelLinear) and m.int8 is not None]
saved = {id(m): (m.int8, m.group) for m in mods}
def route(on):
    for m in mods: m.int8, m.group = saved[id(m)] if on else (None, None)
runner = eng.runner
torch.manual_seed(0)
ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 600
tokens = torch.randint(0, 150000, (ctx + 200,)).tolist()
kv = SeqKV(runner.kv_shape, capacity=ctx + 200, max_capacity=ctx + 200)
runner.forward([Segment(kv, tokens[:ctx], num_logits=1)]); kv.length = ctx
sizes = [int(s) for s in (sys.argv[2].split(",") if len(sys.argv) > 2 else "1,4,16,64".split(","))]
res = {(n, on): [] for n in sizes for on in (True, False)}
for rnd in range(6):
    for n in sizes:
        for on in ((True, False) if rnd % 2 == 0 else (False, True)):
            route(on)
            seg = Segment(kv, tokens[ctx:ctx + n], num_logits=n)
            t = time.perf_counter(); runner.forward([seg], reuse_logits=True); res[(n, on)].append(time.perf_counter() - t)
for n in sizes:
    a, b = res[(n, True)], res[(n, False)]
    ratios = sorted(x / y for x, y in zip(a, b))
    print(f"{n:4d} tokens: int8 med {1e3*statistics.median(a):7.1f} min {1e3*min(a):7.1f} | bf16 med {1e3*statistics.median(b):7.1f} min {1e3*min(b):7.1f} | paired ratio median {statistics.median(ratios):.2f}")
