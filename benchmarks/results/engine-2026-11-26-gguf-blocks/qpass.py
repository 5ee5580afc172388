import sys, time, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment, ExactKernelLinear
eng, name = LLMEngine.from_config(EngineConfig(prefix_cache=False))
r = eng.runner
mods = [m for m in r.model.modules() if isinstance(m, ExactKernelLinear)]
print("layers", len(mods), "reading blocks", sum(m.blocks is not None for m in mods))
if len(sys.argv) > 1:
    for m in mods: m.blocks = None
ctx = 1024
kv = SeqKV(r.kv_shape, ctx + 600, ctx + 600)
g = torch.Generator().manual_seed(0)
r.forward([Segment(kv, torch.randint(0, r.vocab_size, (ctx,), generator=g).tolist(), 1)])
kv.length = ctx
for n in (1, 2, 4, 5, 8, 16):
    toks = torch.randint(0, r.vocab_size, (n,), generator=g).tolist()
    for _ in range(2):
        r.forward([Segment(kv, toks, n)], reuse_logits=True); kv.length = ctx
    ts = []
    for _ in range(7):
        t = time.perf_counter(); r.forward([Segment(kv, toks, n)], reuse_logits=True); ts.append(time.perf_counter() - t); kv.length = ctx
    print(n, "tokens: min", round(min(ts) * 1000, 1), "median", round(sorted(ts)[3] * 1000, 1), "ms", flush=True)
