"""Whole passes of the 0.5B after CTX cached tokens, exact mode against the default mode in one process, each
size interleaved (median ms). passes_ab.py SIZES CTXS, e.g. 1,4,16,32,64,128 1024,3000"""
import sys, time, torch, os
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
sizes = [int(n) for n in sys.argv[1].split(",")]
ctxs = [int(n) for n in sys.argv[2].split(",")]
engines = {m: LLMEngine.from_config(EngineConfig(model="default", prefix_cache=False, exact=(m == "exact")))[0].runner for m in ("exact", "default")}
g = torch.Generator().manual_seed(0)
for ctx in ctxs:
    prompt = torch.randint(0, 150000, (ctx,), generator=g).tolist()
    kvs = {}
    for m, r in engines.items():
        kv = SeqKV(r.kv_shape, ctx + 600, ctx + 600)
        r.forward([Segment(kv, prompt, 1)]); kv.length = ctx; kvs[m] = kv
    for n in sizes:
        toks = torch.randint(0, 150000, (n,), generator=g).tolist()
        ts = {m: [] for m in engines}
        for rep in range(7 if n < 64 else 5):
            for m, r in engines.items():
                kv = kvs[m]
                t = time.perf_counter(); r.forward([Segment(kv, toks, n)], reuse_logits=True); ts[m].append(time.perf_counter() - t); kv.length = ctx
        med = {m: sorted(v)[len(v)//2]*1000 for m, v in ts.items()}
        print(f"ctx {ctx} n {n}: exact {med['exact']:.1f} default {med['default']:.1f} ratio {med['exact']/med['default']:.2f}", flush=True)
