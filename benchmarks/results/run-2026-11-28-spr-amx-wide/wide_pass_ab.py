"""Whole passes of the 0.5B (bf16, exact mode) with the AMX linear kernel of an older source (its cpu_gemm.c as
the argument, built beside this one) against this build's, alternating pass by pass in one process (the old
library's foretell_linear_amx swapped in). Verify passes of n tokens after 1,200 cached tokens, and prompt chunks
(n tokens, one row of logits) after 0 and 1,024. Medians and the median paired ratio new/old of 8 rounds.

    .venv/bin/python wide_pass_ab.py /path/to/old/cpu_gemm.c
"""
import statistics, sys, time
import torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
from foretell.engine import cpu_gemm
from other_build import other_linear_amx

engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=False))
runner = engine.runner
g = cpu_gemm.load()
new_fn = g._amx
old_fn = other_linear_amx(sys.argv[1], new_fn)
gen = torch.Generator().manual_seed(0)
kv = SeqKV(runner.kv_shape, 4096, 4096)
toks = torch.randint(0, runner.vocab_size, (1200,), generator=gen).tolist()
for i in range(0, 1200, 400):
    runner.forward([Segment(kv, toks[i:i + 400], 1)], reuse_logits=True)


def prompt_pass(n, start):
    kv.length = start
    tokens = torch.randint(0, runner.vocab_size, (n,), generator=gen).tolist()
    t = time.perf_counter()
    runner.forward([Segment(kv, tokens, num_logits=1)], reuse_logits=True)
    return time.perf_counter() - t


cases = [("verify", n) for n in (1, 17, 64, 97, 113, 128, 192, 256)] + [("prompt@0", 512), ("prompt@1024", 512)]
res = {}
for rnd in range(9):
    for kind, n in cases:
        order = (("old", old_fn), ("new", new_fn)) if rnd % 2 else (("new", new_fn), ("old", old_fn))
        for name, fn in order:
            g._amx = fn
            if kind == "verify":
                kv.length = 1200
                dt = _timed_pass(runner, kv, n, runner.vocab_size, gen)[0]
            else:
                dt = prompt_pass(n, 0 if kind == "prompt@0" else 1024)
            if rnd:
                res.setdefault((kind, n, name), []).append(dt)
g._amx = new_fn
for kind, n in cases:
    old, new = res[(kind, n, "old")], res[(kind, n, "new")]
    print(f"{kind:12s} n={n:4d}: old {statistics.median(old) * 1e3:7.1f} ms  new {statistics.median(new) * 1e3:7.1f} ms  "
          f"paired new/old {statistics.median(b / a for a, b in zip(old, new)):.3f}", flush=True)
