"""Pass time by context: passes of 1-128 new tokens after 256-8,192 cached tokens (the cache filled by real
prompt chunks), four interleaved rounds, medians. Exact mode, the default model.

    flock /tmp/foretell-heavy.lock .venv/bin/python benchmarks/results/run-2026-11-27-spr-measured-limits/pass_cost_by_context.py
"""
import sys, time, torch, statistics
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=False))
runner = engine.runner
gen = torch.Generator().manual_seed(0)
Ls = [256, 2048, 4096, 8192]; ns = [1, 4, 16, 64, 128]
kv = SeqKV(runner.kv_shape, max(Ls) + 200, max(Ls) + 200)
toks = torch.randint(0, runner.vocab_size, (max(Ls),), generator=gen).tolist()
for i in range(0, max(Ls), 512):
    runner.forward([Segment(kv, toks[i:i+512], 1)], reuse_logits=True)
res = {}
for rnd in range(4):
    for L in Ls:
        for n in ns:
            kv.length = L
            dt = _timed_pass(runner, kv, n, runner.vocab_size, gen)[0]
            res.setdefault((L, n), []).append(dt)
for L in Ls:
    t1 = statistics.median(res[(L, 1)])
    print(L, " ".join(f"n={n}: {statistics.median(res[(L, n)])*1e3:.0f}ms ({statistics.median(res[(L, n)])/t1:.2f}x)" for n in ns), flush=True)
