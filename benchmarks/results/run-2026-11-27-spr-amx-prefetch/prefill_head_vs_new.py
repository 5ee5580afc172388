import sys, time, torch, statistics
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
import foretell
eng, name = LLMEngine.from_config(EngineConfig(model=sys.argv[1], prefix_cache=False, measure_cost_curve=False))
r = eng.runner
g = torch.Generator().manual_seed(0)
ts = []; t4 = []
for rep in range(6):
    kv = SeqKV(r.kv_shape, 1100, 1100)
    toks = torch.randint(0, r.vocab_size, (1024,), generator=g).tolist()
    t = time.perf_counter(); r.forward([Segment(kv, toks[:512], 1)]); kv.length = 512
    r.forward([Segment(kv, toks[512:], 1)]); kv.length = 1024; ts.append(time.perf_counter() - t)
    kvs = []
    for i in range(4):
        k2 = SeqKV(r.kv_shape, 300, 300); r.forward([Segment(k2, toks[i*50:i*50+200], 1)]); k2.length = 200; kvs.append(k2)
    t = time.perf_counter()
    for step in range(5):
        r.forward([Segment(k2, [toks[step]], 1) for k2 in kvs])
        for k2 in kvs: k2.length = 200
    t4.append((time.perf_counter() - t) / 5)
print(foretell.__file__.split("/src/")[0], f"prefill 1024: min {min(ts):.2f}s med {statistics.median(ts):.2f}s; 4-seq decode step min {min(t4)*1e3:.1f} med {statistics.median(t4)*1e3:.1f} ms", flush=True)
