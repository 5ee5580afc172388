"""Pass time over n new tokens after C cached ones, all (n, C) interleaved in rounds; medians in ms."""
import time, statistics, random, sys
import torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
eng, _ = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))
r = eng.runner
rng = random.Random(0)
ctxs = [int(x) for x in sys.argv[1].split(",")]
ns = [int(x) for x in sys.argv[2].split(",")]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
kvs = {}
for ctx in ctxs:
    kv = SeqKV(r.kv_shape, ctx + 160, ctx + 160)
    toks = [rng.randrange(1000, 20000) for _ in range(ctx)]
    for i in range(0, ctx, 512):
        r.forward([Segment(kv, toks[i:i + 512], 1)]); kv.length = min(ctx, i + 512)
    kvs[ctx] = kv
times = {}
for rd in range(rounds + 1):
    for n in ns:
        for ctx in ctxs:
            toks = [rng.randrange(1000, 20000) for _ in range(n)]
            t = time.perf_counter()
            r.forward([Segment(kvs[ctx], toks, num_logits=n, argmax_only=True)], reuse_logits=True)
            dt = time.perf_counter() - t
            kvs[ctx].length = ctx
            if rd:
                times.setdefault((n, ctx), []).append(dt * 1000)
print("n \\ C " + " ".join(f"{c:>8d}" for c in ctxs))
for n in ns:
    print(f"{n:5d} " + " ".join(f"{statistics.median(times[n, c]):8.1f}" for c in ctxs), flush=True)
