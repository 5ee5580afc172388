"""Whole passes of the 0.5B, fp32 exact mode on the int8 route, after 600 cached tokens: the layers in one kernel call
(foretell_layers_q8) against the layer-by-layer loop, alternating in one process (10 rounds, median paired ratio);
first the bits: logits of passes of 1, 3, 9 and 17 rows, alone and with a second sequence, identical both ways.

    python passes_ab.py [sizes]
"""
import time, sys, torch, statistics
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import Segment
from foretell.engine.kv_cache import SeqKV
eng, name = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))
runner = eng.runner; lean = runner._lean; native = lean.native
torch.manual_seed(0)
ctx = 600
tokens = torch.randint(0, 150000, (ctx + 200,)).tolist()
kv = SeqKV(runner.kv_shape, capacity=ctx + 200, max_capacity=ctx + 200)
runner.forward([Segment(kv, tokens[:ctx], num_logits=1)]); kv.length = ctx
kv2 = SeqKV(runner.kv_shape, capacity=ctx + 200, max_capacity=ctx + 200)
runner.forward([Segment(kv2, tokens[100:ctx], num_logits=1)]); kv2.length = ctx-100
# bits: single and two segments
for n in (1, 3, 9, 17):
    out = {}
    for arm in (0, 1):
        lean.native = native if arm else None
        segs = [Segment(kv, tokens[ctx:ctx+n], num_logits=n), Segment(kv2, tokens[ctx+5:ctx+5+n+2], num_logits=n+2)]
        out[arm] = [l.clone() for l in runner.forward(segs)]
        out[arm] += [runner.forward([Segment(kv, tokens[ctx:ctx+n], num_logits=n)])[0].clone()]
    print(n, "identical", all(torch.equal(a, b) for a, b in zip(out[0], out[1])))
sizes = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [1, 4, 16, 64]
res = {(n, b): [] for n in sizes for b in (0, 1)}
for rnd in range(10):
    for n in sizes:
        for b in ((0, 1) if rnd % 2 == 0 else (1, 0)):
            lean.native = native if b else None
            seg = Segment(kv, tokens[ctx:ctx + n], num_logits=n, argmax_only=True)
            t = time.perf_counter(); runner.forward([seg], reuse_logits=True); res[(n, b)].append(time.perf_counter() - t)
for n in sizes:
    a, b = res[(n, 0)], res[(n, 1)]
    ratio = statistics.median(sorted(y / x for x, y in zip(a, b)))
    print(f"{n:3d} tokens: layer by layer {1e3*statistics.median(a):7.1f} ms | one call {1e3*statistics.median(b):7.1f} ms | paired median ratio {ratio:.3f}", flush=True)
print("native passes", native.passes)
