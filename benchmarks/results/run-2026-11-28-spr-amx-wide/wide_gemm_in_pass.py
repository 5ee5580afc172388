"""Each foretell_linear_amx call timed inside whole passes of n tokens: an older source's (argument 1) and this build's.

    .venv/bin/python wide_gemm_in_pass.py /path/to/old/cpu_gemm.c 128
"""
import sys, time, statistics, collections
import torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine import cpu_gemm
from other_build import other_linear_amx
engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=False))
runner = engine.runner
g = cpu_gemm.load()
new_fn = g._amx
old_fn = other_linear_amx(sys.argv[1], new_fn)
acc = collections.defaultdict(float)
cur = [None, None]
def wrap(*a):
    t = time.perf_counter(); r = cur[1](*a); acc[(cur[0], a[7], a[8])] += time.perf_counter() - t; return r
g._amx = wrap
kv = SeqKV(runner.kv_shape, 4096, 4096)
gen = torch.Generator().manual_seed(0)
tot = collections.defaultdict(float)
n = int(sys.argv[2])
for rnd in range(6):
    for name, fn in (("old", old_fn), ("new", new_fn)):
        cur[:] = [name, fn]
        kv.length = 1000
        dt = _timed_pass(runner, kv, n, runner.vocab_size, gen)[0]
        tot[name] += dt
for name in ("old", "new"):
    print(name, f"pass {tot[name]/6*1e3:.1f} ms; gemm", {k[1:]: round(v / 6 * 1e3, 1) for k, v in acc.items() if k[0] == name}, f"sum {sum(v for k, v in acc.items() if k[0]==name)/6*1e3:.1f}")
