"""ms per call, 2 threads: the CPU kernel's bf16 linear rows on AMX tiles, on VDPBF16PS, and oneDNN (F.linear);
attention on AMX tiles against SDPA (grouped heads, a mask) and the VDPBF16PS kernel. The 0.5B's shapes.
    flock /tmp/foretell-heavy.lock .venv/bin/python benchmarks/results/run-2026-11-27-spr-amx/kernels_amx.py"""
import time

import torch

from foretell.engine import cpu_gemm

torch.set_num_threads(2)
amx = cpu_gemm.load()
assert amx is not None and amx.amx, "needs a CPU with AMX"
dot = amx.without_amx()


def ms(f, reps=9):
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return sorted(times)[reps // 2] * 1e3


print("linear: rows, AMX tiles / VDPBF16PS / oneDNN")
for n, k in [(896, 896), (128, 896), (4864, 896), (896, 4864), (151936, 896)]:
    w = (torch.randn(n, k) * 0.05).bfloat16()
    row = []
    for m in (1, 4, 16, 64, 128):
        x = torch.randn(m, k).bfloat16()
        reps = 3 if n > 100000 else 9
        row.append(f"{m}: {ms(lambda: amx.linear(x, w), reps):.2f} / {ms(lambda: dot.linear(x, w), reps):.2f} / "
                   f"{ms(lambda: torch.nn.functional.linear(x, w), reps):.2f}")
    print(f"{n} x {k}  " + "  ".join(row), flush=True)
print("attention, 14 heads (2 KV heads), 64 dims: queries, AMX tiles / SDPA / VDPBF16PS")
for ctx in (1024, 3000):
    k, v = (torch.randn(2, ctx + 600, 64).bfloat16() for _ in range(2))
    row = []
    for n in (1, 16, 64, 128, 512):
        q = torch.randn(14, n, 64).bfloat16()
        first, end = [0] * n, [ctx + i + 1 for i in range(n)]
        mask = torch.ones(n, ctx + n, dtype=torch.bool).tril(ctx)
        sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
            q[None], k[None, :, : ctx + n], v[None, :, : ctx + n], attn_mask=mask, enable_gqa=True)
        row.append(f"{n}: {ms(lambda: amx.attention(q, k, v, first, end, 0.125)):.2f} / {ms(sdpa):.2f} / "
                   f"{ms(lambda: dot.attention(q, k, v, first, end, 0.125)):.2f}")
    print(f"after {ctx} keys  " + "  ".join(row), flush=True)
