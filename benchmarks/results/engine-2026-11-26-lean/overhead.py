import sys, time, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment, ExactKernelLinear
e = LLMEngine.from_config(EngineConfig(prefix_cache=False))[0]
r = e.runner
gemm = next(m for m in r.model.modules() if isinstance(m, ExactKernelLinear)).gemm
if "nogroup" in sys.argv:
    for m in r.model.modules():
        if isinstance(m, ExactKernelLinear): m.group = None
print("groups", len({id(m.group) for m in r.model.modules() if getattr(m, "group", None) is not None}))
acc = {"c": 0.0, "n": 0}
def wrap(fn):
    def w(*a):
        t = time.perf_counter(); out = fn(*a); acc["c"] += time.perf_counter() - t; acc["n"] += 1; return out
    return w
if "wrap" in sys.argv:
    gemm._linear_q = wrap(gemm._linear_q); gemm._dot = wrap(gemm._dot)
    gemm._attention_dot = wrap(gemm._attention_dot) if gemm._attention_dot else None
    gemm._attention = {k: wrap(v) for k, v in gemm._attention.items()}
g = torch.Generator().manual_seed(0)
ctx = 600
kv = SeqKV(r.kv_shape, ctx + 64, ctx + 64)
r.forward([Segment(kv, torch.randint(0, 10000, (ctx,), generator=g).tolist(), 1)]); kv.length = ctx
n = 1
toks = torch.randint(0, 10000, (n,), generator=g).tolist()
def run():
    r.forward([Segment(kv, toks, n)], reuse_logits=True); kv.length = ctx
for _ in range(5): run()
best = None
for _ in range(30):
    acc["c"] = 0.0; acc["n"] = 0
    t = time.perf_counter(); run(); dt = time.perf_counter() - t
    if best is None or dt < best[0]: best = (dt, acc["c"], acc["n"])
print("pass ms", round(best[0] * 1e3, 2), "in C ms", round(best[1] * 1e3, 2), "calls", best[2], "outside C", round((best[0] - best[1]) * 1e3, 2))
if "nogroup" in sys.argv:
    pass
