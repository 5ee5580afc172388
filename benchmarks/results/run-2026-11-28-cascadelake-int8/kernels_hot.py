"""The same layer again and again (weights in cache): 1 and 2 threads, int8 against the bf16 route."""
import ctypes, json, time, sys, torch
from safetensors import safe_open
from pathlib import Path
from foretell.engine import cpu_gemm
lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else str(cpu_gemm.load().path))
lib.foretell_linear_q8.argtypes = [ctypes.c_void_p]*2 + [ctypes.c_int] + [ctypes.c_void_p]*2 + [ctypes.c_int]*4
lib.foretell_linear_bf16.argtypes = [ctypes.c_void_p]*4 + [ctypes.c_int]*5
d = Path.home()/".cache/foretell/models/qwen2.5-coder-0.5b-instruct-bf16"
f = safe_open(str(d/"gguf_blocks.foretell"), "pt"); m = safe_open(str(d/"model.safetensors"), "pt")
for nm, fmt in (("model.layers.0.mlp.gate_proj.weight", 6), ("model.layers.11.mlp.down_proj.weight", 12)):
    b = f.get_tensor(nm); w = m.get_tensor(nm).bfloat16().contiguous(); n, k = w.shape
    for T in (1, 2):
        for M in (1, 16):
            x = torch.randn(M, k); y = torch.empty(M, n)
            def q(): lib.foretell_linear_q8(x.data_ptr(), b.data_ptr(), fmt, None, y.data_ptr(), M, n, k, T)
            def bf(): lib.foretell_linear_bf16(x.data_ptr(), w.data_ptr(), None, y.data_ptr(), M, n, k, T, 0)
            res = []
            for fn in (q, bf):
                for _ in range(20): fn()
                t = time.perf_counter()
                for _ in range(200): fn()
                res.append((time.perf_counter() - t) / 200 * 1e3)
            print(f"{nm.split('.')[-2]} T={T} M={M}: hot q8 {res[0]:.3f} ms  bf16 {res[1]:.3f} ms")
