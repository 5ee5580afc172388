"""CpuGemm.linear with an older source's foretell_linear_amx (its cpu_gemm.c as the argument) against this build's, call by call.

    .venv/bin/python wide_call_ab.py /path/to/old/cpu_gemm.c
"""
import ctypes, sys, time, tempfile, statistics
from pathlib import Path
import torch
from foretell.engine import cpu_gemm
g = cpu_gemm.load()
new_fn = g._amx
cpu_gemm.SOURCE = Path(sys.argv[1])
old_lib = ctypes.CDLL(str(cpu_gemm._build(Path(tempfile.mkdtemp()))))
old_fn = old_lib.foretell_linear_amx
old_fn.restype, old_fn.argtypes = new_fn.restype, new_fn.argtypes
torch.manual_seed(0)
for N, K in ((9728, 896), (896, 4864), (151936, 896)):
    ws = [(torch.randn(N, K) * 0.02).bfloat16() for _ in range(6 if N < 100000 else 1)]
    for M in (128, 256, 512):
        x = torch.randn(M, K).bfloat16()
        r = {"old": [], "new": []}
        outs = {}
        for rnd in range(12):
            for name, fn in ((("old", old_fn), ("new", new_fn)) if rnd % 2 else (("new", new_fn), ("old", old_fn))):
                g._amx = fn
                for w in ws:
                    t = time.perf_counter(); y = g.linear(x, w); r[name].append(time.perf_counter() - t)
                outs[name] = y
        print(N, K, M, f"old {statistics.median(r['old'])*1e3:.2f} new {statistics.median(r['new'])*1e3:.2f} paired {statistics.median(b/a for a, b in zip(r['old'], r['new'])):.3f} same {torch.equal(outs['old'], outs['new'])}", flush=True)
