"""Cold-weight ms per call, foretell_linear_bf16dot (bf16 weights) vs foretell_linear_q (GGUF blocks), the 0.5B's
shapes and formats with random blocks (24 matrices in turn, as a pass meets them), 2 threads."""
import ctypes, sys, time, torch, numpy as np, gguf
sys.path.insert(0, "src")
from foretell.testing.tiny_gguf import random_blocks
lib = ctypes.CDLL(sys.argv[1])
def prep(fmt, n, k, seed):
    qtype = getattr(gguf.GGMLQuantizationType, fmt)
    if fmt in ("Q5_0", "Q8_0"):
        raw = gguf.quants.quantize(np.random.default_rng(seed).standard_normal((n, k)).astype(np.float32) * 0.05, qtype)
    else:
        raw = random_blocks(fmt, n, k, seed)
    q = torch.from_numpy(np.ascontiguousarray(raw).reshape(-1).copy())
    w = torch.empty(n, k, dtype=torch.bfloat16)
    lib.foretell_dequantize(ctypes.c_void_p(q.data_ptr()), int(qtype), 0, n, k, ctypes.c_void_p(w.data_ptr()))
    return int(qtype), q, w
cases = {"up 4864x896 Q5_0": ("Q5_0", 4864, 896, 24), "down 896x4864 Q4_K": ("Q4_K", 896, 4864, 12),
"q 896x896 Q5_0": ("Q5_0", 896, 896, 24),
         "head 151936x896 Q5_0": ("Q5_0", 151936, 896, 1)}
for label, (fmt, n, k, copies) in cases.items():
    sets = [prep(fmt, n, k, s) for s in range(copies)]
    line = []
    for M in (1, 2, 4, 8):
        x = torch.randn(M, k, generator=torch.Generator().manual_seed(M)).bfloat16()
        ya, yb = torch.empty(M, n), torch.empty(M, n)
        best = {}
        for rnd in range(4):
            for quant in (False, True):
                t0 = time.perf_counter()
                for f, q, w in sets:
                    if quant:
                        lib.foretell_linear_q(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(q.data_ptr()), f, None, ctypes.c_void_p(yb.data_ptr()), M, n, k, 2, 0)
                    else:
                        lib.foretell_linear_bf16dot(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(w.data_ptr()), None, ctypes.c_void_p(ya.data_ptr()), M, n, k, 2, 0)
                dt = (time.perf_counter() - t0) / len(sets) * 1e3
                best[quant] = min(best.get(quant, 1e9), dt)
        assert torch.equal(ya, yb), (label, M)
        line.append(f"{M}: {best[False]:.3f} -> {best[True]:.3f}")
    print(f"{label:22s}", "   ".join(line), flush=True)
