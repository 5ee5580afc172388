import os, sys, time, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
exact = sys.argv[1] == "exact"
import os
e = LLMEngine.from_config(EngineConfig(model=os.environ.get("MODEL"), exact=exact, prefix_cache=False))[0]
r = e.runner
g = torch.Generator().manual_seed(0)
for n in tuple(int(x) for x in os.environ.get("SIZES", "512,2048").split(",")):
    best = float("inf")
    for _ in range(3):
        kv = SeqKV(r.kv_shape, n + 8, n + 8)
        toks = torch.randint(0, 10000, (n,), generator=g).tolist()
        t = time.perf_counter()
        for i in range(0, n, 512):
            r.forward([Segment(kv, toks[i:i + 512], num_logits=1 if i + 512 >= n else 0)])
            kv.length += len(toks[i:i + 512])
        best = min(best, time.perf_counter() - t)
    print(sys.argv[1], n, "tokens: %.2f s, %.0f tok/s" % (best, n / best), flush=True)
