"""CpuGemm.linear with an older source's foretell_linear_amx (its cpu_gemm.c as the argument) against this build's, call by call.

    .venv/bin/python wide_call_ab.py /path/to/old/cpu_gemm.c
"""
import sys, time, statistics
import torch
from foretell.engine import cpu_gemm
from other_build import other_linear_amx
g = cpu_gemm.load()
new_fn = g._amx
old_fn = other_linear_amx(sys.argv[1], new_fn)
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
