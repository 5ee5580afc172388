"""Whole passes of the 0.5B around the 16-row tile boundaries (exact mode, argmax_only as greedy passes: the start-up
measurement's passes), after 300 and 3,000 cached tokens: each pass over the one-token pass timed right before it,
median of 5 rounds."""
import statistics, sys, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False))
runner = engine.runner
print("engine cost curve:", engine.cost.points if hasattr(engine.cost, "points") else engine.cost)
gen = torch.Generator().manual_seed(0)
Ls = [300, 3000]
ns = [1, 8, 15, 16, 17, 18, 20, 24, 32, 33, 48, 49, 64]
kv = SeqKV(runner.kv_shape, max(Ls) + 128, max(Ls) + 128)
toks = torch.randint(0, runner.vocab_size, (max(Ls),), generator=gen).tolist()
for i in range(0, max(Ls), 512):
    runner.forward([Segment(kv, toks[i:i+512], 1)], reuse_logits=True)
res = {}
for rnd in range(6):
    for L in Ls:
        for n in ns:
            kv.length = L
            t1 = _timed_pass(runner, kv, 1, runner.vocab_size, gen)[0]
            kv.length = L
            dt = _timed_pass(runner, kv, n, runner.vocab_size, gen)[0]
            if rnd: res.setdefault((L, n), []).append(dt / t1)
for L in Ls:
    print(L, " ".join(f"{n}:{statistics.median(res[(L, n)]):.2f}" for n in ns), flush=True)
