"""One-token (and 16-token) pass times at growing context, the default model and dtype: python ctx_times.py [ROUNDS]"""
import statistics, sys, time
import torch
from foretell.config import EngineConfig
from foretell.engine.kv_cache import SeqKV
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import Segment
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
engine, _ = LLMEngine.from_config(EngineConfig(model="default", dtype="auto", measure_cost_curve=False))
runner = engine.runner
V = runner.vocab_size
gen = torch.Generator().manual_seed(0)
for context in (64, 512, 1024, 2048, 4096):
    kv = SeqKV(runner.kv_shape, capacity=context + 64, max_capacity=context + 64)
    toks = torch.randint(0, V, (context,), generator=gen).tolist()
    for i in range(0, context, 512):
        runner.forward([Segment(kv, toks[i:i + 512], num_logits=1)], reuse_logits=True)
        kv.length = min(i + 512, context)
    def timed(n):
        t = time.perf_counter()
        runner.forward([Segment(kv, torch.randint(0, V, (n,), generator=gen).tolist(), num_logits=n, argmax_only=True)], reuse_logits=True)
        dt = time.perf_counter() - t
        kv.length = context
        return dt
    timed(1); timed(16)
    one = statistics.median(timed(1) for _ in range(rounds * 4))
    six = statistics.median(timed(16) for _ in range(rounds))
    print(f"context {context:5d}: one token {1000 * one:6.1f} ms, 16 tokens {1000 * six:6.1f} ms", flush=True)
