"""A prompt chunk of 512 rows on foretell_gemm_q8 (gemm_int8): the file's blocks (decoded per 32 weight rows with
16-row transposes) against panels (unpacked), cold weights (4 copies cycled), alternating, fastest of 5."""
import time, torch, sys
sys.path.insert(0, "tests")
from foretell.engine import cpu_gemm
from test_int8_linears import blocks_of
g = cpu_gemm.load()
for fmt, n, k in (("Q5_0", 4864, 896), ("Q6_K", 896, 4864), ("Q5_0", 896, 896), ("Q8_0", 128, 896)):
    copies = [blocks_of(fmt, n, k, seed=s)[0] for s in range(4)]
    panels = [g.panels(c) for c in copies]
    x = torch.randn(512, k)
    assert torch.equal(g.gemm_int8(x, copies[0]), g.gemm_int8(x, panels[0]))
    res = {0: [], 1: []}
    for rep in range(5):
        for arm in ((0, 1) if rep % 2 == 0 else (1, 0)):
            t = time.perf_counter()
            for w in (panels if arm else copies): g.gemm_int8(x, w)
            res[arm].append((time.perf_counter() - t) / 4)
    a, b = min(res[0]), min(res[1])
    print(f"{fmt} {n}x{k} 512 rows: blocks {1e3*a:7.2f} ms ({512*n*k/a/1e9:.0f} GMAC/s) panels {1e3*b:7.2f} ms ({512*n*k/b/1e9:.0f}) ratio {b/a:.2f}, same bits", flush=True)
