import sys, time, torch
from foretell.engine import cpu_gemm
g = cpu_gemm.load()
torch.manual_seed(0)
H, G, D = 14, 2, 64
cap = 5000
keys = torch.randn(G, cap, D); values = torch.randn(G, cap, D)
res = {}
for L in (512, 2048, 4096):
    for T in (1, 16, 64, 512):
        if T > L: continue
        start = L - T
        q = torch.randn(H, T, D)
        firsts = [0]*T; ends = [start + t + 1 for t in range(T)]
        g.attention(q, keys, values, firsts, ends, 0.125)
        best = 1e9
        for _ in range(5 if T < 512 else 2):
            t0 = time.perf_counter(); out = g.attention(q, keys, values, firsts, ends, 0.125); best = min(best, time.perf_counter() - t0)
        mac = sum(ends) * H * D * 2
        print(f"L={L} T={T}: {best*1e3:.3f} ms  {mac/best/1e9:.1f} GMAC/s", flush=True)
        res[(L, T)] = out
torch.save(res, sys.argv[1] if len(sys.argv) > 1 else "/tmp/attn_ref.pt")
