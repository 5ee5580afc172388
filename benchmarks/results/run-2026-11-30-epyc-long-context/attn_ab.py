"""Old vs new kernel library, attention only, alternating per call: ms medians and the ratio new/old.

    git show 17c6b33:src/foretell/engine/cpu_gemm.c > /tmp/old_gemm.c; cp src/foretell/engine/cpu_gemm.c /tmp/new_gemm.c
    TL=$(python -c "import torch,pathlib;print(pathlib.Path(torch.__file__).parent/'lib')")
    for v in old new; do gcc -O3 -march=native -fopenmp -shared -fPIC /tmp/${v}_gemm.c -o /tmp/${v}_gemm.so -L$TL -Wl,-rpath,$TL; done
    python attn_ab.py 300,1000,4096,8192 1,5,16,96"""
import sys, time, statistics, ctypes, torch
from foretell.engine.cpu_gemm import CpuGemm
libs = {n: CpuGemm(ctypes.CDLL(p), p) for n, p in (("old", "/tmp/old_gemm.so"), ("new", "/tmp/new_gemm.so"))}
H, G, D = 14, 2, 64
torch.manual_seed(0)
for L in [int(x) for x in sys.argv[1].split(",")]:
    for T in [int(x) for x in sys.argv[2].split(",")]:
        cap = L + 64
        k = torch.randn(G, cap, D); v = torch.randn(G, cap, D); q = torch.randn(H, T, D)
        first = [0] * T; end = [L - T + 1 + t for t in range(T)]
        tiles = {}; outs = {}
        for n, g in libs.items():
            tiles[n] = torch.zeros(G, -(-cap // g.key_tile), D, g.key_tile)
            outs[n] = g.attention(q, k, v, first, end, 0.125, tiles=tiles[n], valid=0)
        ts = {n: [] for n in libs}
        for _ in range(9):
            for n, g in libs.items():
                t0 = time.perf_counter(); g.attention(q, k, v, first, end, 0.125, tiles=tiles[n], valid=L - T); ts[n].append(time.perf_counter() - t0)
        o, nw = statistics.median(ts["old"]) * 1e3, statistics.median(ts["new"]) * 1e3
        print(f"L {L:5d} T {T:3d}: old {o:7.2f} new {nw:7.2f} ms  new/old {nw / o:.2f}  same bits {torch.equal(outs['old'], outs['new'])}", flush=True)
