"""One linear layer per call, cold weights (6 copies cycled), rows 1-64: foretell_linear_q8 (decode and verify
rows) against foretell_gemm_q8 (prompt chunks), alternating, fastest of 6. Run from the repository root.
"""
import ctypes, time, torch, numpy as np, sys, statistics
sys.path.insert(0, "tests")
from foretell.engine import cpu_gemm
from test_int8_linears import blocks_of
g = cpu_gemm.load()
fn, q8 = g._gemm_q8, g._linear_q8
def run(f, x, blocks):
    m, k = x.shape; n = blocks.shape[0]
    y = torch.empty(m, n)
    assert f(x.data_ptr(), blocks.data.data_ptr(), blocks.fmt, None, y.data_ptr(), m, n, k, 2) == 0
    return y
shapes = (("Q5_0", 4864, 896), ("Q6_K", 896, 4864), ("Q5_0", 896, 896), ("Q8_0", 128, 896))
# cold weights: cycle through 8 copies (~30 MB each set) so the weights come from memory
for fmt, n, k in shapes:
    copies = [blocks_of(fmt, n, k, seed=s)[0] for s in range(6)]
    for m in (1, 2, 4, 8, 16, 32, 64):
        x = torch.randn(m, k)
        res = {0: [], 1: []}
        for rep in range(6):
            for arm in ((0, 1) if rep % 2 == 0 else (1, 0)):
                f = fn if arm else q8
                t = time.perf_counter()
                for b in copies: run(f, x, b)
                res[arm].append((time.perf_counter() - t) / len(copies))
        a, b = min(res[0]), min(res[1])
        print(f"{fmt} {n}x{k} rows {m:3d}: linear_q8 {1e3*a:7.3f} ms  gemm_q8 {1e3*b:7.3f} ms  ratio {b/a:.2f}", flush=True)
