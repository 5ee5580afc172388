"""Whole 0.5B passes of n tokens after C cached ones, the attention from the old or the new kernel library
(alternating pass by pass in one process; the rest of the kernels the package's own). Medians in ms, new/old.
Two engines, one built from /tmp/old_gemm.c (see attn_ab.py), one from the package's source.

    python pass_ab.py 256,2048,4096,8192 1,16,64,96 3"""
import sys, time, statistics, random
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
import foretell.engine.cpu_gemm as cg
from pathlib import Path
new_source = cg.SOURCE
runners = {}
for arm, src in (("old", Path("/tmp/old_gemm.c")), ("new", new_source)):
    cg.SOURCE = src; cg.load.cache_clear()
    runners[arm] = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))[0].runner
    print(arm, cg.load()._path if hasattr(cg.load(), "_path") else cg.load(), flush=True)
cg.SOURCE = new_source
r = runners["new"]
rng = random.Random(0)
ctxs = [int(x) for x in sys.argv[1].split(",")]
ns = [int(x) for x in sys.argv[2].split(",")]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
kvs = {}
for ctx in ctxs:
    kv = SeqKV(r.kv_shape, ctx + 640, ctx + 640)
    toks = [rng.randrange(1000, 20000) for _ in range(ctx)]
    for i in range(0, ctx, 512):
        r.forward([Segment(kv, toks[i:i + 512], 1)]); kv.length = min(ctx, i + 512)
    kvs[ctx] = kv
    kvs[ctx, "old"] = SeqKV(r.kv_shape, ctx + 640, ctx + 640)
    for i in range(0, ctx, 512):
        runners["old"].forward([Segment(kvs[ctx, "old"], toks[i:i + 512], 1)]); kvs[ctx, "old"].length = min(ctx, i + 512)
times = {}
for rd in range(rounds + 1):
    for n in ns:
        for ctx in ctxs:
            toks = [rng.randrange(1000, 20000) for _ in range(n)]
            for arm in ("old", "new") if rd % 2 else ("new", "old"):
                kv = kvs[ctx] if arm == "new" else kvs[ctx, "old"]
                t = time.perf_counter()
                runners[arm].forward([Segment(kv, toks, num_logits=n, argmax_only=True)], reuse_logits=True)
                dt = time.perf_counter() - t
                kv.length = ctx
                if rd:
                    times.setdefault((n, ctx, arm), []).append(dt * 1000)
print("n \\ C  " + " ".join(f"{c:>22d}" for c in ctxs))
for n in ns:
    print(f"{n:5d} " + " ".join(f"{statistics.median(times[n, c, 'old']):7.1f} {statistics.median(times[n, c, 'new']):7.1f} {statistics.median(times[n, c, 'new']) / statistics.median(times[n, c, 'old']):5.2f}" for c in ctxs), flush=True)
