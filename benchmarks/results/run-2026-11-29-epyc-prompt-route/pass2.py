"""24-layer 0.5B-shaped int8 pass (cold weights), two kernel builds alternating: python pass2.py A.so B.so rows"""
import sys, time, ctypes, torch
sys.path.insert(0, "tests")
from test_int8_linears import blocks_of
from foretell.engine import cpu_gemm
torch.set_num_threads(2)
libs = [cpu_gemm.CpuGemm(ctypes.CDLL(p), p, amx=False) for p in sys.argv[1:3]]
shapes = [("Q5_0", 896, 896), ("Q5_0", 128, 896), ("Q8_0", 128, 896), ("Q5_0", 896, 896), ("Q5_0", 4864, 896),
          ("Q5_0", 4864, 896), (None, 896, 4864)]
layers = []
for l in range(24):
    for i, (fmt, n, k) in enumerate(shapes):
        fmt = fmt or ("Q6_K" if l % 2 else "Q4_K")
        wb, dec = blocks_of(fmt, n, k, seed=100 * l + i)
        layers.append(wb)
for m in [int(r) for r in sys.argv[3].split(",")]:
    xs = {896: torch.randn(m, 896), 4864: torch.randn(m, 4864)}
    t = [[], []]
    for _ in range(15):
        for i, g in enumerate(libs):
            s = time.perf_counter()
            for wb in layers: g.linear_int8(xs[wb.shape[1]], wb)
            t[i].append((time.perf_counter() - s) * 1e3)
    med = [sorted(v)[7] for v in t]
    print(f"rows {m:3d}  A {med[0]:7.2f} ms  B {med[1]:7.2f} ms  B/A {med[1]/med[0]:.3f}  (min {min(t[0]):.2f} {min(t[1]):.2f})", flush=True)
