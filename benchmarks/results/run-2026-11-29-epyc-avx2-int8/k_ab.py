"""AVX2 int8 route vs bf16-copy fp32 route vs MKL fp32, 0.5B shapes, alternating, ms per call."""
import sys, time, torch, numpy as np
sys.path.insert(0, "tests")  # run from the repository root
from test_int8_linears import blocks_of
from foretell.engine import cpu_gemm
torch.set_num_threads(2)
g = cpu_gemm.load()
shapes = [("q/o 896x896 Q5_0", "Q5_0", 896, 896), ("gate 4864x896 Q5_0", "Q5_0", 4864, 896),
          ("down 896x4864 Q6_K", "Q6_K", 896, 4864), ("down 896x4864 Q4_K", "Q4_K", 896, 4864),
          ("v 128x896 Q8_0", "Q8_0", 128, 896)]
rows_list = [int(r) for r in (sys.argv[1] if len(sys.argv) > 1 else "1,4,16,64,256").split(",")]
for name, fmt, n, k in shapes:
    wb, dec = blocks_of(fmt, n, k, seed=1)
    w32 = torch.from_numpy(dec).bfloat16().float()
    wbf = w32.bfloat16()
    for m in rows_list:
        x = torch.randn(m, k)
        arms = {"int8": lambda: g.linear_int8(x, wb), "bf16k": lambda: g.linear(x, wbf),
                "mkl32": lambda: torch.nn.functional.linear(x, w32)}
        t = {a: [] for a in arms}
        reps = max(3, int(200 / m))
        for _ in range(5):
            for a, f in arms.items():
                f()
                s = time.perf_counter()
                for _ in range(reps):
                    f()
                t[a].append((time.perf_counter() - s) / reps * 1e3)
        print(f"{name:22s} rows {m:4d}  " + "  ".join(f"{a} {min(v):7.3f}" for a, v in t.items()), flush=True)
