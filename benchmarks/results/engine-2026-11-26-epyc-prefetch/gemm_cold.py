"""ms per call of foretell's GEMM from each library given, cold weights (24 matrices of a shape in turn, 2 for the head),
min of REPS rounds (4). python gemm_cold.py OLD.so NEW.so; SHAPES=8960x1536,... (out x in), MS=1,16 (rows), XDT=float32 for fp32 inputs, WDT=float32 for fp32 weights."""
import torch, time, ctypes, sys
from pathlib import Path
from foretell.engine import cpu_gemm
libs = sys.argv[1:]
gs = [cpu_gemm.CpuGemm(ctypes.CDLL(l), Path(l)) for l in libs]
torch.manual_seed(0)
shapes = tuple(tuple(int(v) for v in s.split("x")) for s in __import__("os").environ.get("SHAPES", "4864x896,896x4864,151936x896").split(","))
W = {s: [torch.randn(*s).to(getattr(torch, __import__("os").environ.get("WDT", "bfloat16"))) for _ in range(24 if s[0] < 100000 else 2)] for s in shapes}
out = torch.empty(128 * 151936)
res = {}
MS = tuple(int(v) for v in __import__("os").environ.get("MS", "1,16,93,128").split(","))
for rep in range(int(__import__("os").environ.get("REPS", "4"))):
    for gi, g in enumerate(gs):
        for s in shapes:
            for m in MS:
                x = torch.randn(m, s[1]).to(getattr(torch, __import__("os").environ.get("XDT", "bfloat16")))
                t = time.perf_counter()
                for w in W[s]: g._run(x, w, None, out, False)
                res.setdefault((gi, s, m), []).append((time.perf_counter() - t) / len(W[s]))
for s in shapes:
    for m in MS:
        print(s, m, " ".join(f"{Path(libs[gi]).stem}:{min(res[(gi, s, m)])*1e3:.2f}" for gi in range(len(gs))), " GF/s", " ".join(f"{2*s[0]*s[1]*m/min(res[(gi, s, m)])/1e9:.0f}" for gi in range(len(gs))))
x = torch.randn(37, shapes[0][1]).to(getattr(torch, __import__("os").environ.get("XDT", "bfloat16")))
r = [g._run(x, W[shapes[0]][0], None, None, False) for g in gs]  # the libraries agree bit for bit
print("identical:", [torch.equal(r[0], q) for q in r])
