"""Pass times of n new tokens after 256 cached ones, relative to one token (paired, median of ROUNDS), for the
model and dtype given: FUSED=ROWS python pass_times_fused.py MODEL DTYPE [ROUNDS]
(FUSED: passes on panels of up to that many rows decode them in registers; unset: the default, 16)."""
import statistics, sys, time
import torch
from foretell.config import EngineConfig
from foretell.engine.kv_cache import SeqKV
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import Segment

model, dtype = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
engine, _ = LLMEngine.from_config(EngineConfig(model=model, dtype=dtype, measure_cost_curve=False))
runner = engine.runner
import os
from foretell.engine import cpu_gemm
if os.environ.get('FUSED'):
    cpu_gemm.load().p8_fused_rows = int(os.environ['FUSED'])
print('fused rows', cpu_gemm.load().p8_fused_rows)
sizes = [1, 2, 4, 6, 8, 12, 16, 17, 18, 24, 32, 33, 48, 64]
context = 256
kv = SeqKV(runner.kv_shape, capacity=context + 200, max_capacity=context + 200)
gen = torch.Generator().manual_seed(0)
V = runner.vocab_size
runner.forward([Segment(kv, torch.randint(0, V, (context,), generator=gen).tolist(), num_logits=1)], reuse_logits=True)
kv.length = context

def timed(n):
    toks = torch.randint(0, V, (n,), generator=gen).tolist()
    t = time.perf_counter()
    runner.forward([Segment(kv, toks, num_logits=n, argmax_only=True)], reuse_logits=True)
    dt = time.perf_counter() - t
    kv.length = context
    return dt

for n in sizes:
    timed(n)
ratios = {n: [] for n in sizes}
ones = []
for _ in range(rounds):
    for n in sizes:
        one = timed(1)
        ones.append(one)
        ratios[n].append(timed(n) / one)
print(f"{model} {dtype}: one-token pass median {1000 * statistics.median(ones):.1f} ms")
for n in sizes:
    r = statistics.median(ratios[n])
    print(f"  {n:4d} tokens {r:6.2f}x one token  ({1000 * r * statistics.median(ones) / n:6.2f} ms a token)")
