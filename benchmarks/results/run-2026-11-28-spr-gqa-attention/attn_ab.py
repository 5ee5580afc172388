"""Kernel alone: old .so (argv[1]) vs this build's foretell_attention_amx; bits and time."""
import ctypes, sys, time, statistics, torch
from foretell.engine import cpu_gemm
g = cpu_gemm.load()
new_fn = g._attention_amx
old = ctypes.CDLL(sys.argv[1]).foretell_attention_amx
old.restype, old.argtypes = new_fn.restype, new_fn.argtypes
torch.manual_seed(0)
H, G, D = int(sys.argv[2]) if len(sys.argv) > 2 else 14, 2, 64
cap = 8300
k = torch.randn(G, cap, D).bfloat16(); v = torch.randn(G, cap, D).bfloat16()
for keys, n in [(8192, 1), (8192, 5), (8192, 17), (8192, 128), (2048, 1), (1000, 1), (1000, 5), (1000, 17), (300, 1), (3000, 33)]:
    q = torch.randn(H, n, D).bfloat16()
    first = [0] * n; end = [keys - n + 1 + t for t in range(n)]
    b = torch.tensor([first, end], dtype=torch.int32)
    outs, ts = {}, {"old": [], "new": []}
    for rnd in range(15):
        for name, fn in (("old", old), ("new", new_fn)):
            out = torch.empty(H, n, D)
            t0 = time.perf_counter()
            fn(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), b[0].data_ptr(), b[1].data_ptr(), n, H, G, D, cap * D, D ** -0.5, 2)
            ts[name].append(time.perf_counter() - t0)
            outs[name] = out
    same = torch.equal(outs["old"], outs["new"])
    print(f"keys={keys} n={n}: old {statistics.median(ts['old'])*1e3:.3f} new {statistics.median(ts['new'])*1e3:.3f} ms  same bits: {same}", flush=True)
