"""int8 products on GGUF blocks against the bf16 weights' fp32 route, on the 0.5B's own layers: correctness (against
a float64 reference of the int8 scheme, and row independence), then ms per call with cold weights (24 layers of a
kind in turn), the two kernels alternating, 7 rounds.

    python kernels_int8.py [path to a build of engine/cpu_gemm.c; default: the one foretell builds]
"""
import ctypes, json, time, sys, numpy as np, torch
from safetensors import safe_open
from pathlib import Path
from foretell.engine import cpu_gemm
lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else str(cpu_gemm.load().path))
lib.foretell_linear_q8.argtypes = [ctypes.c_void_p]*2 + [ctypes.c_int] + [ctypes.c_void_p]*2 + [ctypes.c_int]*4
lib.foretell_q8_decode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
lib.foretell_linear_bf16.argtypes = [ctypes.c_void_p]*4 + [ctypes.c_int]*5
d = Path.home()/".cache/foretell/models/qwen2.5-coder-0.5b-instruct-bf16"
f = safe_open(str(d/"gguf_blocks.foretell"), "pt"); types = json.loads(f.metadata()["gguf_types"])
m = safe_open(str(d/"model.safetensors"), "pt")
T = torch.get_num_threads()
def q8(x, blk, fmt, n, k):
    y = torch.empty(x.shape[0], n); r = lib.foretell_linear_q8(x.data_ptr(), blk.data_ptr(), fmt, None, y.data_ptr(), x.shape[0], n, k, T); assert r == 0, r; return y
def bf(x, w):
    n, k = w.shape; y = torch.empty(x.shape[0], n); lib.foretell_linear_bf16(x.data_ptr(), w.data_ptr(), None, y.data_ptr(), x.shape[0], n, k, T, 0); return y
def ref(x, W):  # quantized-activation reference in float64
    M, K = x.shape; xb = x.double().reshape(M, K//32, 32)
    amax = xb.abs().amax(-1, keepdim=True); dx = (amax.float()/127).double()
    idv = torch.where(amax > 0, (127/amax.float()).double(), torch.zeros_like(amax))
    qx = torch.round((xb.float()*idv.float()).double())
    return ((qx*dx).reshape(M, K)) @ W.double().T
names = {}
for name, t in types.items():
    if "layers." in name:
        kind = name.split(".")[-2]; names.setdefault((kind, t), []).append(name)
g = torch.Generator().manual_seed(0)
for (kind, fmt), lst in sorted(names.items()):
    name = lst[0]; blk = f.get_tensor(name); w = m.get_tensor(name + ".weight") if not name.endswith("weight") else m.get_tensor(name)
    n, k = w.shape
    W = torch.empty(n, k); lib.foretell_q8_decode(blk.data_ptr(), fmt, 0, n, k, W.data_ptr())
    same = torch.equal(W.bfloat16(), w.bfloat16())
    x = torch.randn(7, k, generator=g) * 0.5; x[:, 3] = 8.0
    y = q8(x, blk, fmt, n, k); yr = ref(x, W); yfull = x.double() @ W.double().T
    inv = all(torch.equal(q8(x[i:i+1].clone(), blk, fmt, n, k)[0], y[i]) for i in range(7)) and torch.equal(q8(x[:3].clone(), blk, fmt, n, k), y[:3])
    print(f"{kind:10s} fmt {fmt:2d} {n}x{k} decode==bf16w {same} maxrel-vs-qref {((y.double()-yr).abs().max()/yr.abs().max()).item():.2e} "
          f"rel-vs-fp {((y.double()-yfull).abs().max()/yfull.abs().max()).item():.2e} row-invariant {inv}")
# timing: cold weights, cycle through 24 layers of a kind; alternate the two kernels, min of 7 rounds each
import statistics
def once(fn):
    t = time.perf_counter(); fn(); return time.perf_counter() - t
for kind, fmt in (("gate_proj", 6), ("down_proj", 12), ("q_proj", 6)):
    lst = names[(kind, fmt)]
    blks = [f.get_tensor(nm) for nm in lst]; ws = [m.get_tensor(nm).bfloat16().contiguous() for nm in lst]
    n, k = ws[0].shape
    for M in (1, 2, 4, 8, 16, 32, 64):
        x = torch.randn(M, k, generator=g)
        tq, tb = [], []
        for r in range(7):
            tq.append(once(lambda: [q8(x, b, fmt, n, k) for b in blks]) / len(blks))
            tb.append(once(lambda: [bf(x, w) for w in ws]) / len(ws))
        print(f"{kind} fmt{fmt} {n}x{k} M={M:3d}: q8 {min(tq)*1e3:.3f} ms  bf16 {min(tb)*1e3:.3f} ms  ratio {min(tq)/min(tb):.2f}  (medians {statistics.median(tq)*1e3:.3f} / {statistics.median(tb)*1e3:.3f})")
