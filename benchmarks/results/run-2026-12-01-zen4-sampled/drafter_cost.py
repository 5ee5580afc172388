"""The 0.5B drafter against the 1.5B target as LLMEngine.from_config builds them (run from the repository root):
the parameter ratio it was priced at and both one-token passes timed."""
import time, statistics, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.cost import _timed_pass
from foretell.engine.runner import Segment
eng, _ = LLMEngine.from_config(EngineConfig(model="qwen2.5-coder-1.5b", draft_model="qwen2.5-coder-0.5b"))
print("priced token_cost", eng.drafter.token_cost)
gen = torch.Generator().manual_seed(1)
def ms(runner, n, ctx=512, reps=15):
    kv = SeqKV(runner.kv_shape, capacity=ctx + 64, max_capacity=ctx + 64)
    runner.forward([Segment(kv, torch.randint(0, 1000, (ctx,), generator=gen).tolist(), num_logits=1)], reuse_logits=True)
    kv.length = ctx
    ts = []
    for _ in range(reps):
        ts.append(_timed_pass(runner, kv, n, runner.vocab_size, gen)[0] * 1e3); kv.length = ctx
    return statistics.median(ts)
for _ in range(2):
    t1, d1 = ms(eng.runner, 1), ms(eng.drafter.runner, 1)
    print(f"target 1 tok {t1:.1f} ms, drafter 1 tok {d1:.1f} ms: measured ratio {d1/t1:.2f}; drafter 4 tok {ms(eng.drafter.runner, 4):.1f} ms")
