"""TFLOPS of foretell's AMX linear kernel against oneDNN (torch's bf16 linear) for the 0.5B's layer shapes (the
joined q/k/v, o, the joined gate/up, down) at 64-512 rows; random bf16 weights, warm caches, ten calls each.

Run from the repository root: .venv/bin/python benchmarks/results/run-2026-11-27-spr-prompt-kernel/amx_linear_tflops.py
"""
import time, torch
from foretell.engine import cpu_gemm
g = cpu_gemm.load()
print("amx", g.amx)
torch.manual_seed(0)
for (N, K) in [(1152, 896), (896, 896), (9728, 896), (896, 4864)]:
    w = (torch.randn(N, K) * 0.02).bfloat16()
    for M in (64, 128, 256, 512):
        x = torch.randn(M, K).bfloat16()
        for _ in range(3): g.linear(x, w, None)
        t = time.perf_counter(); reps = 10
        for _ in range(reps): g.linear(x, w, None)
        dt = (time.perf_counter() - t) / reps
        lib = torch.nn.functional.linear
        for _ in range(3): lib(x, w)
        t = time.perf_counter()
        for _ in range(reps): lib(x, w)
        dl = (time.perf_counter() - t) / reps
        print(f"N={N} K={K} M={M}: kernel {dt*1000:.2f} ms {2*M*N*K/dt/1e12:.2f} TFLOPS | oneDNN {dl*1000:.2f} ms {2*M*N*K/dl/1e12:.2f} TFLOPS")
