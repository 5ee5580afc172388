"""The cost curve t(n)/t(1) measured after 256, 2048 and 6000 cached tokens (paired, as at start-up), and t(1)."""
import sys, time, statistics, torch
from foretell.bench.harness import BenchOptions, load_engine
from foretell.engine.cost import measure_cost_points, _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
engine, _, _ = load_engine(BenchOptions(suites=["realedit"], model=sys.argv[1] if len(sys.argv) > 1 else None))
runner = engine.runner
for C in (256, 2048, 6000, 256):
    pts = measure_cost_points(runner, context=C, rounds=3)
    kv = SeqKV(runner.kv_shape, capacity=C + 8, max_capacity=C + 8)
    gen = torch.Generator().manual_seed(1)
    runner.forward([Segment(kv, torch.randint(0, runner.vocab_size, (C,), generator=gen).tolist(), num_logits=1)], reuse_logits=True)
    kv.length = C
    t1 = min(_timed_pass(runner, kv, 1, runner.vocab_size, gen)[0] for _ in range(5))
    print(f"context {C}: t(1) {t1*1e3:.1f} ms; ratios " + ", ".join(f"{n}: {r:.2f}" for n, r in pts.items()), flush=True)
