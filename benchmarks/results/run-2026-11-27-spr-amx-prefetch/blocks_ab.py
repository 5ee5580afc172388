import sys, time, torch, statistics
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
from foretell.engine import cpu_gemm
eng, name = LLMEngine.from_config(EngineConfig(model=sys.argv[1] if len(sys.argv) > 1 else "default", prefix_cache=False))
r = eng.runner
g = torch.Generator().manual_seed(0)
ctx = 1200
kv = SeqKV(r.kv_shape, ctx + 300, ctx + 300)
r.forward([Segment(kv, torch.randint(0, r.vocab_size, (ctx,), generator=g).tolist(), 1)]); kv.length = ctx
s = int(sys.argv[2]) if len(sys.argv) > 2 else 1
ratios = []; ta = []; tb = []
for rep in range(int(sys.argv[3]) if len(sys.argv) > 3 else 60):
    toks = torch.randint(0, r.vocab_size, (s,), generator=g).tolist()
    res = {}
    for v in ((4, 0) if rep % 2 else (0, 4)):
        cpu_gemm.BLOCK_ROWS_MAX = v
        t = time.perf_counter(); out = r.forward([Segment(kv, toks, s)], reuse_logits=True); res[v] = time.perf_counter() - t
        kv.length = ctx
    ratios.append(res[0] / res[4]); ta.append(res[4]); tb.append(res[0])
print(f"n={s} blocks min {min(ta)*1e3:.1f} med {statistics.median(ta)*1e3:.1f}; bf16 min {min(tb)*1e3:.1f} med {statistics.median(tb)*1e3:.1f}; paired bf16/blocks median {statistics.median(ratios):.3f} q25 {statistics.quantiles(ratios, n=4)[0]:.3f} q75 {statistics.quantiles(ratios, n=4)[2]:.3f}")
