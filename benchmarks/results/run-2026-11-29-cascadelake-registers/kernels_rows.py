"""Passes on panels read into registers (p8_tile, CpuGemm.p8_fused_rows = all) against through a buffer per tile (0),
one process, alternating, cold weights (32 copies, ~100 MB, cycled), fastest of the rounds.
    python kernels_rows.py 1,2,3,4,6,8,12,16,32,64 [rounds]"""
import time, torch, sys, dataclasses
sys.path.insert(0, "tests")
from foretell.engine import cpu_gemm
from test_int8_linears import blocks_of
g = cpu_gemm.load()
rows = [int(r) for r in sys.argv[1].split(",")] if len(sys.argv) > 1 else [1, 2, 4, 8, 16, 32]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
for fmt, n, k in (("Q5_0", 4864, 896), ("Q6_K", 896, 4864), ("Q4_K", 896, 4864), ("Q5_0", 896, 896)):
    base = [g.panels(blocks_of(fmt, n, k, seed=s)[0]) for s in range(4)]
    ws = [dataclasses.replace(b, data=b.data.clone()) for b in base for _ in range(8)]
    for m in rows:
        x = torch.randn(m, k)
        res = {0: [], 1 << 30: []}
        for rep in range(rounds):
            for arm in ((0, 1 << 30) if rep % 2 == 0 else (1 << 30, 0)):
                g.p8_fused_rows = arm
                t = time.perf_counter()
                for w in ws: g.linear_int8(x, w)
                res[arm].append((time.perf_counter() - t) / len(ws))
        a, b = min(res[0]), min(res[1 << 30])
        print(f"{fmt} {n}x{k} rows {m:2d}: buffer {1e3*a:.3f} ms  registers {1e3*b:.3f} ms  ratio {b/a:.2f}", flush=True)
g.p8_fused_rows = 16
