"""Two builds of engine/cpu_gemm.c on the 0.5B's int8-route layers: whether B gives A's bits (passes of 1-9, 12, 16,
33 and 40 rows; Q6_K only against itself, the round before had none) and every row alone the bits it has among
40, then ms per call with cold weights (the 24 layers of a kind in turn), the builds alternating, 7 rounds.

    python kernels_cmp.py OLD.so NEW.so [kinds, e.g. gate_proj,down_proj] [rows, e.g. 1,8,16,64]
"""
import ctypes, json, time, sys, statistics, torch
from safetensors import safe_open
from pathlib import Path
libs = [ctypes.CDLL(p) for p in sys.argv[1:3]]
for lib in libs:
    lib.foretell_linear_q8.argtypes = [ctypes.c_void_p]*2 + [ctypes.c_int] + [ctypes.c_void_p]*2 + [ctypes.c_int]*4
d = Path.home()/".cache/foretell/models/qwen2.5-coder-0.5b-instruct-bf16"
f = safe_open(str(d/"gguf_blocks.foretell"), "pt"); types = json.loads(f.metadata()["gguf_types"])
T = torch.get_num_threads()
def q8(lib, x, blk, fmt, n, k, bias=None):
    y = torch.empty(x.shape[0], n); r = lib.foretell_linear_q8(x.data_ptr(), blk.data_ptr(), fmt, bias.data_ptr() if bias is not None else None, y.data_ptr(), x.shape[0], n, k, T); assert r == 0, r; return y
names = {}
for name, t in types.items():
    if "layers." in name:
        names.setdefault((name.split(".")[-2], t), []).append(name)
g = torch.Generator().manual_seed(0)
kinds = sys.argv[3].split(",") if len(sys.argv) > 3 and sys.argv[3] else None
MS = [int(v) for v in sys.argv[4].split(",")] if len(sys.argv) > 4 else [1, 2, 4, 8]
for (kind, fmt), lst in sorted(names.items()):
    blk = f.get_tensor(lst[0]); n = {"q_proj":896,"k_proj":128,"v_proj":128,"o_proj":896,"gate_proj":4864,"up_proj":4864,"down_proj":896}[kind]
    k = blk.numel() * {6: 32, 8: 32, 12: 256, 14: 256}[fmt] // {6: 22, 8: 34, 12: 144, 14: 210}[fmt] // n
    x = torch.randn(40, k, generator=g); x[:, 5] = 6.0; bias = torch.randn(n, generator=g)
    ok = fmt == 14 or all(torch.equal(q8(libs[0], x[:M].clone(), blk, fmt, n, k, bias), q8(libs[1], x[:M].clone(), blk, fmt, n, k, bias)) for M in list(range(1, 10)) + [12, 16, 33, 40])
    alone = all(torch.equal(q8(libs[1], x[i:i+1].clone(), blk, fmt, n, k)[0], q8(libs[1], x, blk, fmt, n, k)[i]) for i in range(0, 40, 3))
    print(f"{kind:10s} fmt {fmt:2d} {n}x{k}: same bits as A {ok}, rows alone == in 9 {alone}", flush=True)
def once(fn):
    t = time.perf_counter(); fn(); return time.perf_counter() - t
for kind, fmt in (("gate_proj", 6), ("down_proj", 12), ("q_proj", 6)):  # Q6_K: the round before had no int8 Q6_K to time against
    if kinds and kind not in kinds or (kind, fmt) not in names: continue
    lst = names[(kind, fmt)]; blks = [f.get_tensor(nm) for nm in lst]
    n = {"q_proj":896,"gate_proj":4864,"down_proj":896}[kind]
    k = blks[0].numel() * {6: 32, 8: 32, 12: 256, 14: 256}[fmt] // {6: 22, 8: 34, 12: 144, 14: 210}[fmt] // n
    for M in MS:
        x = torch.randn(M, k, generator=g); t = [[], []]
        for r in range(7):
            for a in (0, 1) if r % 2 == 0 else (1, 0):
                t[a].append(once(lambda: [q8(libs[a], x, b, fmt, n, k) for b in blks]) / len(blks))
        print(f"{kind} fmt{fmt} {n}x{k} M={M}: A {min(t[0])*1e3:.3f}  B {min(t[1])*1e3:.3f} ms  B/A {min(t[1])/min(t[0]):.2f} (medians {statistics.median(t[0])*1e3:.3f} / {statistics.median(t[1])*1e3:.3f})", flush=True)
