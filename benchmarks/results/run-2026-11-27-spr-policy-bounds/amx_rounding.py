"""How TDPBF16PS rounds (AMX tiles, Sapphire Rapids), checked against foretell's AMX linear route bit for bit: per
output and per 32 values (one tile step) the 16 even-position products are summed in order and the 16 odd-position
products in order (fp32, round to nearest even, denormals flushed), those two sums are added, and that is added to
the accumulator. Neither one sequential chain, nor a chain of pair sums, nor exact sums rounded once match.

    .venv/bin/python benchmarks/results/run-2026-11-27-spr-policy-bounds/amx_rounding.py"""
import torch

from foretell.engine import cpu_gemm

torch.set_num_threads(2)
torch.set_flush_denormal(True)
gemm = cpu_gemm.load()
assert gemm is not None and gemm.amx, "needs a CPU with AMX"


def tile_model(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    rows, k = x.shape
    out = torch.empty(rows, w.shape[0])
    for m in range(rows):
        p = (w.float() * x[m].float()).view(w.shape[0], k // 32, 16, 2)  # exact products (bf16 x bf16)
        even = odd = torch.zeros(w.shape[0], k // 32)
        for j in range(16):
            even, odd = even + p[:, :, j, 0], odd + p[:, :, j, 1]
        step = even + odd
        acc = torch.zeros(w.shape[0])
        for kb in range(k // 32):
            acc = acc + step[:, kb]
        out[m] = acc
    return out


g = torch.Generator().manual_seed(0)
for n, k in [(896, 896), (4864, 896), (896, 4864)]:
    w = (torch.randn(n, k, generator=g) * 0.05).bfloat16()
    x = (torch.randn(3, k, generator=g) * 3).bfloat16()
    tiles = torch.empty(3, n)
    assert gemm._amx_run(x.contiguous(), w, None, None, tiles, rounded=False)
    differ = int((tiles.view(torch.int32) != tile_model(x, w).view(torch.int32)).sum())
    print(f"{n} x {k}: {differ} of {tiles.numel()} outputs differ from the model")
