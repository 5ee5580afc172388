"""foretell_attention_amx: this tree's build against another source's, the same bits on 60 random calls (windows, 1-200
queries), then the time per layer call (the 0.5B's heads: 14 query heads, 2 KV heads, 64 dimensions), alternating.

    git show 7ee58b9:src/foretell/engine/cpu_gemm.c > /tmp/old.c
    .venv/bin/python attention_call_ab.py /tmp/old.c [contexts, e.g. 1024,4096]
"""
import ctypes, sys, tempfile, time, statistics
from pathlib import Path
import torch
from foretell.engine import cpu_gemm
torch.set_num_threads(2)
torch.manual_seed(0)
g = cpu_gemm.load()
own = cpu_gemm.SOURCE
cpu_gemm.SOURCE = Path(sys.argv[1])
old = ctypes.CDLL(str(cpu_gemm._build(Path(tempfile.mkdtemp())))).foretell_attention_amx
cpu_gemm.SOURCE = own
new = g._attention_amx
old.restype, old.argtypes = new.restype, new.argtypes
H, G, D = 14, 2, 64
def call(fn, q, keys, values, first, end, cap):
    T = q.shape[1]
    b = torch.tensor([first, end], dtype=torch.int32)
    out = torch.empty(H, T, D)
    assert fn(q.data_ptr(), keys.data_ptr(), values.data_ptr(), out.data_ptr(), b[0].data_ptr(), b[1].data_ptr(), T, H, G, D, cap * D, D ** -0.5, 2) == 0
    return out
# bits: random ranges, windows, odd sizes, large scores
for trial in range(60):
    ctx = int(torch.randint(1, 3000, ()))
    T = int(torch.randint(1, 40, ())) if trial < 30 else int(torch.randint(30, 200, ()))
    cap = ctx + T + 40
    mag = [0.1, 1.0, 8.0][trial % 3]
    keys = (torch.randn(G, cap, D) * mag).to(torch.bfloat16); values = torch.randn(G, cap, D).to(torch.bfloat16)
    q = (torch.randn(H, T, D) * mag).to(torch.bfloat16)
    end = [ctx + t + 1 for t in range(T)]
    first = [max(0, e - int(torch.randint(1, 600, ()))) if trial % 2 else 0 for e in end]
    a, b = call(old, q, keys, values, first, end, cap), call(new, q, keys, values, first, end, cap)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32)), (trial, (a - b).abs().max())
print("bits: 60 random calls equal", flush=True)
for ctx in [int(c) for c in (sys.argv[2] if len(sys.argv) > 2 else "256,1024,2048,4096,8192").split(",")]:
    cap = ctx + 256
    keys = torch.randn(G, cap, D).to(torch.bfloat16); values = torch.randn(G, cap, D).to(torch.bfloat16)
    row = []
    for T in (1, 16, 64, 128):
        q = torch.randn(H, T, D).to(torch.bfloat16)
        first, end = [0] * T, [ctx + t + 1 for t in range(T)]
        res = {}
        for rnd in range(7):
            for name, fn in ((("old", old), ("new", new)) if rnd % 2 else (("new", new), ("old", old))):
                t0 = time.perf_counter()
                for _ in range(5): call(fn, q, keys, values, first, end, cap)
                res.setdefault(name, []).append((time.perf_counter() - t0) / 5 * 1000)
        o, n = statistics.median(res["old"]), statistics.median(res["new"])
        row.append(f"T {T}: {o:.3f} -> {n:.3f} ms ({n / o:.2f}x)")
    print(f"ctx {ctx}: " + "; ".join(row), flush=True)
