"""Times passes of 1-64 new tokens after 512 cached ones, sizes interleaved, min over rounds: python measure_curve.py MODEL CONTEXT ROUNDS.
On this machine, qwen2.5-coder-1.5b 512 10 printed {1: 1.0, 2: 1.19, 3: 1.17, 4: 1.31, 5: 1.51, 6: 1.58, 8: 1.42, 12: 1.46, 16: 1.53,
20: 1.69, 24: 1.81, 32: 1.9, 48: 2.01, 64: 2.38}, one token 157.7 ms."""
import sys, time, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
eng, name = LLMEngine.from_config(EngineConfig(model=sys.argv[1], prefix_cache=False))
runner = eng.runner
print("cached curve:", {k: round(v, 2) for k, v in sorted(eng.cost.points.items())} if hasattr(eng.cost, "points") else eng.cost)
ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 512
sizes = [1, 2, 3, 4, 5, 6, 8, 12, 16, 20, 24, 32, 48, 64]
kv = SeqKV(runner.kv_shape, capacity=ctx + 80, max_capacity=ctx + 80)
gen = torch.Generator().manual_seed(0)
runner.forward([Segment(kv, torch.randint(0, runner.vocab_size, (ctx,), generator=gen).tolist(), num_logits=1)], reuse_logits=True)
kv.length = ctx
best = {n: 1e9 for n in sizes}
for r in range(int(sys.argv[3]) if len(sys.argv) > 3 else 8):
    for n in sizes:
        s, _ = _timed_pass(runner, kv, n, runner.vocab_size, gen)
        kv.length = ctx
        best[n] = min(best[n], s)
print({n: round(best[n] / best[1], 2) for n in sizes}, f"t1={best[1]*1000:.1f}ms")
