import time, torch
from foretell.engine import cpu_gemm
from foretell.engine.runner import _attend, _segment_mask
torch.set_num_threads(2)
g = cpu_gemm.load()
for heads, kvh, dim in ((14, 2, 64), (12, 2, 128)):
    cap = 4096
    keys = torch.randn(kvh, cap, dim).bfloat16(); values = torch.randn(kvh, cap, dim).bfloat16()
    for start, n in ((0, 512), (512, 512), (1536, 512), (3584, 512)):
        q = torch.randn(1, heads, n, dim).bfloat16()
        first, mask = _segment_mask(start, n, None, "cpu")
        firsts = [0] * n; ends = [start + i + 1 for i in range(n)]
        scale = dim ** -0.5
        ts, tk = 9, 9
        for _ in range(4):
            t = time.perf_counter(); a = _attend(q, keys[None, :, :start + n], values[None, :, :start + n], mask, scale); ts = min(ts, time.perf_counter() - t)
            t = time.perf_counter(); b = g.attention(q[0], keys, values, firsts, ends, scale); tk = min(tk, time.perf_counter() - t)
        err = (a[0].float() - b.float()).abs().max().item()
        print(f"H{heads} D{dim} start {start} n {n}: sdpa {ts*1e3:.1f} ms kernel {tk*1e3:.1f} ms maxdiff {err:.3g}", flush=True)
