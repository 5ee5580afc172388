import sys, time, torch, statistics
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
import foretell
eng, name = LLMEngine.from_config(EngineConfig(model=sys.argv[1], prefix_cache=False, measure_cost_curve=False))
r = eng.runner
g = torch.Generator().manual_seed(0)
ctx = 1200
kv = SeqKV(r.kv_shape, ctx + 300, ctx + 300)
r.forward([Segment(kv, torch.randint(0, r.vocab_size, (ctx,), generator=g).tolist(), 1)]); kv.length = ctx
sizes = (1, 4, 16, 32, 64, 128)
best = {s: [] for s in sizes}
for rep in range(8):
    for s in sizes:
        toks = torch.randint(0, r.vocab_size, (s,), generator=g).tolist()
        t = time.perf_counter(); r.forward([Segment(kv, toks, s)], reuse_logits=True); best[s].append(time.perf_counter() - t)
        kv.length = ctx
print(foretell.__file__.split("/src/")[0], " ".join(f"n{s}:{min(v)*1e3:.1f}/{statistics.median(v)*1e3:.1f}" for s, v in best.items()), flush=True)
