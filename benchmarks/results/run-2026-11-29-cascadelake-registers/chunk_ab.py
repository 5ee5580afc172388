"""Prompt-chunk passes (64 and 512 rows, the buffer route: g8_tile) on this build against an older one (its cached
kernel), paired, alternating; the same bits."""
import time, torch, sys, ctypes, dataclasses
from pathlib import Path
sys.path.insert(0, "tests")
from foretell.engine import cpu_gemm
from test_int8_linears import blocks_of
old = cpu_gemm.CpuGemm(ctypes.CDLL("/root/.cache/foretell/kernels/4bb9b38bd2be29bc/libforetell_gemm.so"), Path("/root/.cache/foretell/kernels/4bb9b38bd2be29bc/libforetell_gemm.so"))
new = cpu_gemm.load()
print(new.path)
for fmt, n, k in (("Q5_0", 4864, 896), ("Q6_K", 896, 4864), ("Q4_K", 896, 4864)):
    w = new.panels(blocks_of(fmt, n, k, seed=1)[0])
    for m in (64, 512):
        x = torch.randn(m, k)
        assert torch.equal(old.gemm_int8(x, w), new.gemm_int8(x, w))
        res = {"old": [], "new": []}
        for rep in range(8):
            for arm in (("old", "new") if rep % 2 == 0 else ("new", "old")):
                g = old if arm == "old" else new
                t = time.perf_counter()
                for _ in range(5): g.gemm_int8(x, w)
                res[arm].append((time.perf_counter() - t) / 5)
        print(f"{fmt} {n}x{k} rows {m}: old {1e3*min(res['old']):.3f} ms new {1e3*min(res['new']):.3f} ms ratio {min(res['new'])/min(res['old']):.3f} same bits", flush=True)
