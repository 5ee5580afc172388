"""linear_q8 on the file's blocks (its own order) against panels (gemm_q8's order), cold weights (6 copies
cycled), rows 1-64, alternating, fastest of 6 (2 threads)."""
import time, torch, sys
sys.path.insert(0, "tests")
from foretell.engine import cpu_gemm
from test_int8_linears import blocks_of
g = cpu_gemm.load()
shapes = (("Q5_0", 4864, 896), ("Q6_K", 896, 4864), ("Q5_0", 896, 896), ("Q8_0", 128, 896), ("Q5_0", 151936 // 4, 896))
rows = [int(r) for r in sys.argv[1].split(",")] if len(sys.argv) > 1 else [1, 2, 4, 8, 16, 32, 64]
for fmt, n, k in shapes:
    copies = [blocks_of(fmt, n, k, seed=s)[0] for s in range(6 if n < 10000 else 2)]
    panels = [g.panels(c) for c in copies]
    for m in rows:
        x = torch.randn(m, k)
        res = {0: [], 1: []}
        for rep in range(6):
            for arm in ((0, 1) if rep % 2 == 0 else (1, 0)):
                ws = panels if arm else copies
                t = time.perf_counter()
                for w in ws: g.linear_int8(x, w)
                res[arm].append((time.perf_counter() - t) / len(ws))
        a, b = min(res[0]), min(res[1])
        print(f"{fmt} {n}x{k} rows {m:3d}: blocks {1e3*a:7.3f} ms  panels {1e3*b:7.3f} ms  ratio {b/a:.2f}", flush=True)
