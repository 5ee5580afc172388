"""Whole 0.5B passes of n tokens after C cached ones in ONE engine, its kernel library swapped pass by pass between
the build of OLD.c and the package's source (no second engine: no bias from where each engine's weights lie).
    python pass_same.py OLD.c 256,2048 1,16,96 ROUNDS"""
import sys, time, statistics, random, ctypes
from pathlib import Path
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
import foretell.engine.cpu_gemm as cg
from foretell.paths import cache_dir
r = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))[0].runner
live = cg.load()
new_dict = dict(live.__dict__)
src = cg.SOURCE
cg.SOURCE = Path(sys.argv[1]); old_path = cg._build(cache_dir()); cg.SOURCE = src
old = cg.CpuGemm(ctypes.CDLL(str(old_path)), old_path, amx=False)
old_dict = dict(new_dict); old_dict.update({k: v for k, v in old.__dict__.items()})
print("old", old_path, "new", live.path, flush=True)
rng = random.Random(0)
ctxs = [int(x) for x in sys.argv[2].split(",")]; ns = [int(x) for x in sys.argv[3].split(",")]; rounds = int(sys.argv[4])
kvs = {}
for ctx in ctxs:
    kv = SeqKV(r.kv_shape, ctx + 640, ctx + 640)
    toks = [rng.randrange(1000, 20000) for _ in range(ctx)]
    for i in range(0, ctx, 512):
        r.forward([Segment(kv, toks[i:i + 512], 1)]); kv.length = min(ctx, i + 512)
    kvs[ctx] = kv
times = {}
for rd in range(rounds + 1):
    for n in ns:
        for ctx in ctxs:
            toks = [rng.randrange(1000, 20000) for _ in range(n)]
            outs = {}
            for arm in (("old", "new") if rd % 2 else ("new", "old")):
                live.__dict__.update(old_dict if arm == "old" else new_dict)
                kv = kvs[ctx]
                t = time.perf_counter()
                out = r.forward([Segment(kv, toks, num_logits=n, argmax_only=True)], reuse_logits=True)
                dt = time.perf_counter() - t
                outs[arm] = out[0].argmax(-1).tolist()
                kv.length = ctx
                if rd:
                    times.setdefault((n, ctx, arm), []).append(dt * 1000)
            assert outs["old"] == outs["new"], (n, ctx)
live.__dict__.update(new_dict)
print("n \\ C  " + " ".join(f"{c:>22d}" for c in ctxs))
for n in ns:
    print(f"{n:5d} " + " ".join(f"{statistics.median(times[n, c, 'old']):7.1f} {statistics.median(times[n, c, 'new']):7.1f} {statistics.median(times[n, c, 'new']) / statistics.median(times[n, c, 'old']):5.2f}" for c in ctxs), flush=True)
