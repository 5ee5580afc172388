"""A 1536-token prompt in chunks of 512 (the default prefill chunk), the 0.5B in fp32 exact mode: the chunks' linear
layers on gemm_int8 (foretell_gemm_q8) against the library fp32 GEMM, alternating (3 rounds); then where the time
goes on the int8 route.
"""
import time, sys, torch, statistics
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import Segment, ExactKernelLinear
from foretell.engine.kv_cache import SeqKV
eng, name = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))
runner = eng.runner
g = runner.model.lm_head.gemm
saved = g._gemm_q8
torch.manual_seed(0)
tokens = torch.randint(0, 150000, (1536,)).tolist()
def prefill(on):
    g._gemm_q8 = saved if on else None
    kv = SeqKV(runner.kv_shape, capacity=1600, max_capacity=1600)
    t = time.perf_counter()
    for c in range(0, 1536, 512):
        chunk = tokens[c:c+512]
        last = c + 512 >= 1536
        runner.forward([Segment(kv, chunk, num_logits=1 if last else 0)]); kv.length += len(chunk)
    return time.perf_counter() - t, kv
res = {0: [], 1: []}
for r in range(3):
    for on in ((0, 1) if r % 2 == 0 else (1, 0)):
        dt, kv = prefill(on); res[on].append(dt)
for on in (0, 1): print("int8 chunks" if on else "library   ", ["%.2f" % t for t in res[on]])
import collections
acc = collections.defaultdict(float)
class W:
    def __init__(s, f, key): s.f, s.key = f, key
    def __call__(s, *a):
        t=time.perf_counter(); r=s.f(*a); acc[s.key]+=time.perf_counter()-t; return r
g._gemm_q8 = W(saved, "gemm_q8"); saved = g._gemm_q8
g._linear_q8 = W(g._linear_q8, "linear_q8")
g._attention = {k: W(v, "attention") for k, v in g._attention.items()}
g._glue_fns = {k: tuple(W(f, nm) for f, nm in zip(v, ("rms","silu","rope"))) if v else v for k, v in g._glue_fns.items()}
dt, kv = prefill(1)
print("total %.2f" % dt, {k: round(v, 2) for k, v in acc.items()})
