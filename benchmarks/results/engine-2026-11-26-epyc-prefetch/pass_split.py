import sys, torch, time, collections, os
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine import cpu_gemm
from foretell.engine.runner import Segment
T = collections.defaultdict(float); C = collections.Counter()
orig = cpu_gemm.CpuGemm._run
def run(self, x, w, *a, **k):
    t = time.perf_counter(); r = orig(self, x, w, *a, **k); T[tuple(w.shape)] += time.perf_counter() - t; C[tuple(w.shape)] += 1; return r
cpu_gemm.CpuGemm._run = run
oa = cpu_gemm.CpuGemm.attention
def att(self, *a, **k):
    t = time.perf_counter(); r = oa(self, *a, **k); T['attn'] += time.perf_counter() - t; return r
cpu_gemm.CpuGemm.attention = att
eng = LLMEngine.from_config(EngineConfig(model=os.environ.get("MODEL"), prefix_cache=False))[0]
r = eng.runner; vocab = r.vocab_size; gen = torch.Generator().manual_seed(0)
ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
for n in [int(a) for a in sys.argv[2:]] or [93]:
    kv = SeqKV(r.kv_shape, capacity=ctx + 130, max_capacity=ctx + 130)
    r.forward([Segment(kv, torch.randint(0, vocab, (ctx,), generator=gen).tolist(), num_logits=1)], reuse_logits=True)
    kv.length = ctx
    for _ in range(3): _timed_pass(r, kv, n, vocab, gen)
    T.clear(); C.clear()
    ts = [_timed_pass(r, kv, n, vocab, gen)[0] for _ in range(6)]
    tot = sum(ts)
    print(f"n={n} ctx={ctx} pass ms min {min(ts)*1e3:.0f} med {sorted(ts)[3]*1e3:.0f};", " ".join(f"{k}:{v/6*1e3:.1f}" for k, v in sorted(T.items(), key=lambda kv: -kv[1])), f"rest:{(tot-sum(T.values()))/6*1e3:.1f}", flush=True)
