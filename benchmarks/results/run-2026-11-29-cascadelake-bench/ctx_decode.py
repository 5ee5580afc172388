"""One-token and 16-token passes of the 0.5B after N cached tokens (Cascade Lake, fp32, panels): how decode cost grows
with the context; and the attention kernel's share, timing it alone on the same shapes."""
import time, statistics, random, ctypes
import torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
eng, _ = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))
r = eng.runner
rng = random.Random(0)
for ctx in (128, 1024, 2048, 4096):
    kv = SeqKV(r.kv_shape, ctx + 64, ctx + 64)
    toks = [rng.randrange(1000, 20000) for _ in range(ctx)]
    for i in range(0, ctx, 512):
        r.forward([Segment(kv, toks[i:i + 512], 1)]); kv.length = min(ctx, i + 512)
    res = {}
    for k in (1, 16):
        ts = []
        for _ in range(7):
            t = time.perf_counter(); r.forward([Segment(kv, toks[:k], k)]); ts.append(time.perf_counter() - t)
        res[k] = statistics.median(ts[2:]) * 1000
    print(f"ctx {ctx:5d}: 1-token pass {res[1]:.1f} ms, 16-token pass {res[16]:.1f} ms", flush=True)
