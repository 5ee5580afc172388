"""Whole passes of the 0.5B after 600 cached tokens: panels (A) against the file's blocks (B), two runners in one
process, alternating, median of 8 paired ratios; first: passes on panels give each row the bits of one-row passes."""
import time, sys, torch, statistics
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import Segment
from foretell.engine.kv_cache import SeqKV
runners = {}
for name, on in (("panels", True), ("blocks", False)):
    e, _ = LLMEngine.from_config(EngineConfig(int8_panels=on, measure_cost_curve=False))
    runners[name] = e.runner
    print(name, "panel layers", e.runner.panel_layers, "int8 layers", e.runner.int8_layers, "native", e.runner._lean.native is not None, flush=True)
torch.manual_seed(0)
ctx = 600
tokens = torch.randint(0, 150000, (ctx + 200,)).tolist()
kvs = {}
for name, runner in runners.items():
    kv = SeqKV(runner.kv_shape, capacity=ctx + 200, max_capacity=ctx + 200)
    runner.forward([Segment(kv, tokens[:ctx], num_logits=1)]); kv.length = ctx
    kvs[name] = kv
# bits: a pass of 9 rows against 9 one-row passes (panels)
r, kv = runners["panels"], kvs["panels"]
many = r.forward([Segment(kv, tokens[ctx:ctx + 9], num_logits=9)])[0].clone()
ones = []
for i in range(9):
    kv.length = ctx + i
    ones.append(r.forward([Segment(kv, tokens[ctx + i:ctx + i + 1], num_logits=1)])[0].clone())
kv.length = ctx
print("9-row pass = 9 one-row passes:", torch.equal(many.reshape(9, -1), torch.cat([o.reshape(1, -1) for o in ones])))
sizes = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [1, 4, 16, 32, 64, 128]
res = {(n, k): [] for n in sizes for k in runners}
for rnd in range(8):
    for n in sizes:
        for name in (("panels", "blocks") if rnd % 2 == 0 else ("blocks", "panels")):
            seg = Segment(kvs[name], tokens[ctx:ctx + n], num_logits=n, argmax_only=True)
            t = time.perf_counter(); runners[name].forward([seg], reuse_logits=True); res[(n, name)].append(time.perf_counter() - t)
for n in sizes:
    a, b = res[(n, "blocks")], res[(n, "panels")]
    print(f"{n:3d} tokens: blocks {1e3*statistics.median(a):7.1f} ms | panels {1e3*statistics.median(b):7.1f} ms | paired median ratio {statistics.median(y / x for x, y in zip(a, b)):.3f}", flush=True)
