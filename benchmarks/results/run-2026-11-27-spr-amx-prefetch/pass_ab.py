"""Pass time per size, the AMX GEMM without the weight prefetch (old) against with it (new), the kernel function
swapped pass by pass in one process (fastest of 6). Build the old library first:
  git show ec161e4:src/foretell/engine/cpu_gemm.c > /tmp/amxt/old_gemm.c
  gcc -O3 -march=native -fopenmp -shared -fPIC /tmp/amxt/old_gemm.c -o /tmp/amxt/old_gemm.so -L$TORCH_LIB -Wl,-rpath,$TORCH_LIB
The figures in NOTES.md were taken before the layers stopped reading GGUF blocks on AMX (ec161e4 with the kernel
change only); on later commits it compares the same two kernels in the engine as it now runs."""
import ctypes, sys, time, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
from foretell.engine import cpu_gemm
eng, name = LLMEngine.from_config(EngineConfig(model=sys.argv[1] if len(sys.argv) > 1 else "default", prefix_cache=False))
r = eng.runner
gemm = cpu_gemm.load()
new_fn = gemm._amx
old_lib = ctypes.CDLL("/tmp/amxt/old_gemm.so")
old_fn = old_lib.foretell_linear_amx
old_fn.restype, old_fn.argtypes = new_fn.restype, new_fn.argtypes
g = torch.Generator().manual_seed(0)
ctx = 1200
kv = SeqKV(r.kv_shape, ctx + 300, ctx + 300)
r.forward([Segment(kv, torch.randint(0, r.vocab_size, (ctx,), generator=g).tolist(), 1)]); kv.length = ctx
sizes = [int(s) for s in (sys.argv[2] if len(sys.argv) > 2 else "1,16,32,48,64,96,128").split(",")]
best = {(s, v): 1e9 for s in sizes for v in ("old", "new")}
for rep in range(int(sys.argv[3]) if len(sys.argv) > 3 else 5):
    for s in sizes:
        toks = torch.randint(0, r.vocab_size, (s,), generator=g).tolist()
        outs = {}
        for v, fn in (("old", old_fn), ("new", new_fn)) if rep % 2 == 0 else (("new", new_fn), ("old", old_fn)):
            gemm._amx = fn
            t = time.perf_counter(); out = r.forward([Segment(kv, toks, s)], reuse_logits=True); dt = time.perf_counter() - t
            kv.length = ctx
            best[(s, v)] = min(best[(s, v)], dt)
            outs[v] = out
gemm._amx = new_fn
one = {v: best[(1, v)] for v in ("old", "new")}
for s in sizes:
    o, n = best[(s, "old")], best[(s, "new")]
    print(f"n={s:4d} old {o*1e3:7.1f} ms ({o/one['old']:.2f}x)  new {n*1e3:7.1f} ms ({n/one['new']:.2f}x)  new/old {n/o:.3f}")
