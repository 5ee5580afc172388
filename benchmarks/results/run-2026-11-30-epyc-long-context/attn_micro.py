"""fp32 attention with kept tiles: T queries at the end of L keys, the 0.5B's heads; ms a call, median."""
import sys, time, statistics, torch
from foretell.engine import cpu_gemm
g = cpu_gemm.load()
H, G, D = 14, 2, 64
torch.manual_seed(0)
for L in [int(x) for x in sys.argv[1].split(",")]:
    for T in [int(x) for x in sys.argv[2].split(",")]:
        cap = L + 64
        k = torch.randn(G, cap, D); v = torch.randn(G, cap, D); q = torch.randn(H, T, D)
        tile = g.key_tile
        tiles = torch.zeros(G, -(-cap // tile), D, tile)
        first = [0] * T; end = [L - T + 1 + t for t in range(T)]
        g.attention(q, k, v, first, end, 0.125, tiles=tiles, valid=0)
        ts = []
        for _ in range(7):
            t0 = time.perf_counter(); out = g.attention(q, k, v, first, end, 0.125, tiles=tiles, valid=L - T); ts.append(time.perf_counter() - t0)
        ms = statistics.median(ts) * 1000
        fma = H * T * L * 2 * D / 8 / 2 / 2  # FMA instr / (2 per cycle) / 2 cores = cycles
        print(f"L {L:5d} T {T:3d}: {ms:7.2f} ms  (FMA bound at 3 GHz {fma / 3e6:6.2f} ms)  x24 layers {24*ms:7.1f} ms", flush=True)
        if len(sys.argv) > 3: torch.save(out, sys.argv[3] + f"-{L}-{T}.pt")
