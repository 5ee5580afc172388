import sys, time, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
import inspect
eng, name = LLMEngine.from_config(EngineConfig(model=__import__("os").environ.get("M", "default"), prefix_cache=False))
r = eng.runner
reuse = "reuse_logits" in inspect.signature(r.forward).parameters
ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
kv = SeqKV(r.kv_shape, ctx + 600, ctx + 600)
g = torch.Generator().manual_seed(0)
r.forward([Segment(kv, torch.randint(0, r.vocab_size, (ctx,), generator=g).tolist(), 1)])
kv.length = ctx
res=[]
for n in (1, 16, 64, 128):
    toks = torch.randint(0, r.vocab_size, (n,), generator=g).tolist()
    ts=[]
    for _ in range(7 if n < 64 else 5):
        t=time.perf_counter(); out=(r.forward([Segment(kv, toks, n)], reuse_logits=True) if reuse else r.forward([Segment(kv, toks, n)])); ts.append(time.perf_counter()-t); kv.length = ctx
    res.append(f"{n}:{min(ts)*1000:.1f}")
print(sys.argv[1], " ".join(res), flush=True)
