import time, statistics, torch, numpy as np
from safetensors.torch import load_file
from foretell.engine import cpu_gemm
from foretell.models.loader import resolve_model
import glob, os
g = cpu_gemm.load()
path = resolve_model("default").path
W = None
for f in glob.glob(os.path.join(path, "*.safetensors")):
    d = load_file(f)
    for name in ("lm_head.weight", "model.embed_tokens.weight"):
        if name in d: W = d[name].bfloat16().contiguous(); break
    if W is not None: break
print(W.shape, W.dtype)
t0 = time.perf_counter(); head = cpu_gemm.ArgmaxHead(g, W); print("build", time.perf_counter() - t0, "s")
# hidden states: real-ish via the probe's file if saved, else random with outliers
torch.manual_seed(0)
xs = torch.randn(64, W.shape[1]) * 3
xs[:, 5] *= 20; xs[:, 100] *= 15
xs = xs.bfloat16()
try:
    real = torch.load("/tmp/hidden.pt").bfloat16()
    xs = torch.cat([xs, real[:400]])
except FileNotFoundError:
    pass
bad = 0; cands = []
for m in (1, 2, 5, 16):
    for i in range(0, len(xs) - m, max(m, 7)):
        x = xs[i:i+m].contiguous()
        exact = g.logits(x, W)
        got = head.logits(x, W)
        assert got is not None
        if not torch.equal(got.argmax(-1), exact.argmax(-1)): bad += 1
        sel = got != exact  # non-candidates: must be > exact (upper bounds) and < row max
        assert (got[sel] >= exact[sel]).all()
        assert (got[sel] < exact.max(-1, keepdim=True).values.expand_as(got)[sel]).all()
print("argmax mismatches", bad)
for m in (1, 4, 16):
    x = xs[:m].contiguous()
    te, ta = [], []
    for r in range(15):
        t0 = time.perf_counter(); g.logits(x, W); te.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); head.logits(x, W); ta.append(time.perf_counter() - t0)
    print(f"rows {m}: exact {statistics.median(te)*1e3:.2f} ms  argmax head {statistics.median(ta)*1e3:.2f} ms")
