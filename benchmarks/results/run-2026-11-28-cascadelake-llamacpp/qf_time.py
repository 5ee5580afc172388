import time, torch, numpy as np, gguf
from foretell.engine import cpu_gemm
from foretell.engine.cpu_gemm import GgufWeight
g = cpu_gemm.load(); print(torch.get_num_threads())
res = {}
mats = []
for fmt in ("Q8_0", "Q5_0"):
    qt = getattr(gguf.GGMLQuantizationType, fmt)
    for copy in range(8):  # 8 copies: cold-ish weights, as in a model pass
        vals = np.random.default_rng(copy).standard_normal((4864, 896)).astype(np.float32) * 0.05
        raw = gguf.quants.quantize(vals, qt)
        ref = torch.from_numpy(gguf.quants.dequantize(raw, qt).reshape(4864, 896).copy()).to(torch.bfloat16)
        mats.append((fmt, ref, GgufWeight(int(qt), torch.from_numpy(np.ascontiguousarray(raw).reshape(-1).copy()), (4864, 896))))
b = torch.randn(4864)
for rows in (1, 4):
    x = torch.randn(rows, 896)
    for rnd in range(3):
        for name in ("bf16", "blocks"):
            for fmt in ("Q8_0", "Q5_0"):
                ms = [m for m in mats if m[0] == fmt]
                t = time.perf_counter()
                for _ in range(25):
                    for _, ref, w in ms:
                        g.linear(x, ref, b, **({"blocks": w} if name == "blocks" else {}))
                res.setdefault((rows, name, fmt), []).append((time.perf_counter() - t) / 200 * 1000)
for k, v in sorted(res.items()): print(k, [round(a, 3) for a in v])
