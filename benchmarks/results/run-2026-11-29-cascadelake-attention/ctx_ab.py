import time, statistics, random, sys
import torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
eng, _ = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))
r = eng.runner
rng = random.Random(0)
ctxs = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else [1024, 4096]
for ctx in ctxs:
    kv = SeqKV(r.kv_shape, ctx + 64, ctx + 64)
    toks = [rng.randrange(1000, 20000) for _ in range(ctx)]
    t0 = time.perf_counter()
    for i in range(0, ctx, 512):
        r.forward([Segment(kv, toks[i:i + 512], 1)]); kv.length = min(ctx, i + 512)
    pre = time.perf_counter() - t0
    res = {}
    for k in (1, 16, 64):
        ts = []
        for _ in range(7):
            t = time.perf_counter(); r.forward([Segment(kv, toks[:k], k)]); ts.append(time.perf_counter() - t)
        res[k] = statistics.median(ts[2:]) * 1000
    print(f"ctx {ctx:5d}: prefill {pre:.2f} s, passes 1/16/64 tokens {res[1]:.1f} / {res[16]:.1f} / {res[64]:.1f} ms", flush=True)
