"""hot timing of linear_int8 for a variant .so vs the current source: python variant.py A.so B.so"""
import sys, time, ctypes, torch
sys.path.insert(0, "tests")  # run from the repository root
from test_int8_linears import blocks_of
from foretell.engine import cpu_gemm
torch.set_num_threads(2)
libs = [cpu_gemm.CpuGemm(ctypes.CDLL(p), p, amx=False) for p in sys.argv[1:]]
for fmt, n, k in (("Q5_0", 4864, 896), ("Q6_K", 896, 4864), ("Q4_K", 896, 4864), ("Q8_0", 896, 896)):
    wb, dec = blocks_of(fmt, n, k, seed=1)
    for m in [int(v) for v in __import__("os").environ.get("MS", "1,4,8,16,64,256").split(",")]:
        x = torch.randn(m, k)
        ref = libs[0].linear_int8(x, wb)
        same = [torch.equal(l.linear_int8(x, wb), ref) for l in libs]
        t = [[] for _ in libs]
        reps = max(3, int(100 / m))
        for _ in range(7):
            for i, l in enumerate(libs):
                s = time.perf_counter()
                for _ in range(reps): l.linear_int8(x, wb)
                t[i].append((time.perf_counter() - s) / reps * 1e3)
        print(f"{fmt} {n}x{k} rows {m:3d} " + " ".join(f"{min(v):7.3f}" for v in t), "same" if all(same) else f"DIFF {same}", flush=True)
