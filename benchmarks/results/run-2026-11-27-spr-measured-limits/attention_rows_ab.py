"""Decode and short verify passes by context: the attention kernel of an older build (its .so path, or its
cpu_gemm.c built beside, as the argument) against this build's, alternating pass by pass in one process (the old
library loaded beside the new one, its foretell_attention_amx swapped in). Medians and the median paired ratio
new/old of 6 rounds. Optional: contexts and pass sizes (run-2026-11-28-spr-stairs: 1024,2048,4096,8192 1,17,64,128).

    .venv/bin/python attention_rows_ab.py ~/.cache/foretell/kernels/<old build>/libforetell_gemm.so [contexts sizes]
"""
import ctypes, sys, statistics, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
from foretell.engine import cpu_gemm
engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=False))
runner = engine.runner
g = cpu_gemm.load()
new_fn = g._attention_amx
if sys.argv[1].endswith(".c"):  # a source: built beside this one
    import tempfile
    from pathlib import Path
    own, cpu_gemm.SOURCE = cpu_gemm.SOURCE, Path(sys.argv[1])
    old_lib = ctypes.CDLL(str(cpu_gemm._build(Path(tempfile.mkdtemp()))))
    cpu_gemm.SOURCE = own
else:
    old_lib = ctypes.CDLL(sys.argv[1])
old_fn = old_lib.foretell_attention_amx
old_fn.restype, old_fn.argtypes = new_fn.restype, new_fn.argtypes
gen = torch.Generator().manual_seed(0)
Ls = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "256,2048,4096,8192").split(",")]
ns = [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "1,5,17").split(",")]
kv = SeqKV(runner.kv_shape, max(Ls) + max(ns) + 64, max(Ls) + max(ns) + 64)
toks = torch.randint(0, runner.vocab_size, (max(Ls),), generator=gen).tolist()
for i in range(0, max(Ls), 512):
    runner.forward([Segment(kv, toks[i:i+512], 1)], reuse_logits=True)
res = {}
for rnd in range(7):
    for L in Ls:
        for n in ns:
            for name, fn in (("old", old_fn), ("new", new_fn)):
                g._attention_amx = fn
                kv.length = L
                dt = _timed_pass(runner, kv, n, runner.vocab_size, gen)[0]
                if rnd: res.setdefault((L, n, name), []).append(dt)
g._attention_amx = new_fn
for L in Ls:
    print(L, "  ".join(f"n={n}: old {statistics.median(res[(L, n, 'old')])*1e3:.1f} new {statistics.median(res[(L, n, 'new')])*1e3:.1f} ms "
                       f"(paired {statistics.median(a / b for a, b in zip(res[(L, n, 'new')], res[(L, n, 'old')])):.3f})" for n in ns), flush=True)
