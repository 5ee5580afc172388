"""Interleaved A/B of attention kernel builds: name=source.c[:DEFS] ..."""
import sys, time, ctypes, statistics, tempfile
from pathlib import Path
import torch
from foretell.engine import cpu_gemm
variants = {}
for arg in sys.argv[1:]:
    name, spec = arg.split("=", 1)
    src, *defs = spec.split(":")
    flags = tuple(f"-D{d}" for d in defs)
    orig_src, orig_flags = cpu_gemm.SOURCE, cpu_gemm.FLAGS
    cpu_gemm.SOURCE, cpu_gemm.FLAGS = Path(src), (*orig_flags, *flags)
    path = cpu_gemm._build(Path(tempfile.mkdtemp()))
    cpu_gemm.SOURCE, cpu_gemm.FLAGS = orig_src, orig_flags
    variants[name] = cpu_gemm.CpuGemm(ctypes.CDLL(str(path)), path)
H, G, D = 14, 2, 64
torch.manual_seed(0)
keys = torch.randn(G, 4200, D); values = torch.randn(G, 4200, D)
shapes = [(L, T) for L in (1024, 4096) for T in (1, 16, 64, 512)]
times = {(n, s): [] for n in variants for s in shapes}
for rnd in range(5):
    for s in shapes:
        L, T = s
        q = torch.randn(H, T, D); firsts = [0] * T; ends = [L - T + t + 1 for t in range(T)]
        for n, g in variants.items():
            t0 = time.perf_counter(); g.attention(q, keys, values, firsts, ends, 0.125); times[(n, s)].append(time.perf_counter() - t0)
for s in shapes:
    print(f"L={s[0]:5d} T={s[1]:4d}: " + "  ".join(f"{n} {statistics.median(times[(n, s)])*1e3:7.3f}" for n in variants))
