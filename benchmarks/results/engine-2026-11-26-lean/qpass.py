import sys, time, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
# qpass.py [MODEL [default|exact [SIZES]]]: without a route, the engine's own choice; SIZES like 1,2,4,8,16,64
model = sys.argv[1] if len(sys.argv) > 1 else "default"
exact = {"exact": True, "default": False}.get(sys.argv[2]) if len(sys.argv) > 2 else None
sizes = [int(n) for n in sys.argv[3].split(",")] if len(sys.argv) > 3 else [1, 2, 4, 8, 16, 64]
eng, name = LLMEngine.from_config(EngineConfig(model=model, prefix_cache=False, exact=exact))
r = eng.runner
print("lean", r.lean, "exact", r.exact)
ctx = 1024
kv = SeqKV(r.kv_shape, ctx + 600, ctx + 600)
g = torch.Generator().manual_seed(0)
r.forward([Segment(kv, torch.randint(0, r.vocab_size, (ctx,), generator=g).tolist(), 1)])
kv.length = ctx
out = []
for n in sizes:
    toks = torch.randint(0, r.vocab_size, (n,), generator=g).tolist()
    for _ in range(2):
        r.forward([Segment(kv, toks, n)], reuse_logits=True); kv.length = ctx
    ts = []
    for _ in range(9 if n < 64 else 5):
        t = time.perf_counter(); r.forward([Segment(kv, toks, n)], reuse_logits=True); ts.append(time.perf_counter() - t); kv.length = ctx
    out.append(f"{n}:{min(ts)*1000:.1f}/{sorted(ts)[len(ts)//2]*1000:.1f}")
print(" ".join(out), flush=True)
