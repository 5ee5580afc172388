import time, statistics, random
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
r = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))[0].runner
rng = random.Random(0)
ctx = 1800
kv = SeqKV(r.kv_shape, ctx + 640, ctx + 640)
toks = [rng.randrange(1000, 20000) for _ in range(ctx)]
for i in range(0, ctx, 512):
    r.forward([Segment(kv, toks[i:i + 512], 1)]); kv.length = min(ctx, i + 512)
head = r.model.lm_head
import torch
T = {}
for rd in range(8):
    for n in (16, 64):
        for nl in (n, 1):
            t = [rng.randrange(1000, 20000) for _ in range(n)]
            s = time.perf_counter(); out = r.forward([Segment(kv, t, num_logits=nl, argmax_only=True)], reuse_logits=True); dt = time.perf_counter() - s
            kv.length = ctx
            if rd: T.setdefault((n, nl), []).append(dt * 1000)
for key, v in sorted(T.items()): print(key, round(statistics.median(v), 1), round(min(v), 1))
x = torch.randn(64, 896)
for n in (1, 8, 16, 64):
    ts = []
    for _ in range(6):
        s = time.perf_counter(); head.kernel(x[:n]); ts.append((time.perf_counter() - s) * 1000)
    print("head rows", n, round(statistics.median(ts), 1))
