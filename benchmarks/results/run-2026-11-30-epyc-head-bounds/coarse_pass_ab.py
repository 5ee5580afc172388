"""Whole verify passes (argmax rows) after ~1000 keys of a real file, the coarse head route on/off alternating."""
import time, statistics, sys, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
from foretell.bench.workloads import chat_prompt_ids
eng = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))[0]
r = eng.runner; head = r.model.lm_head; route = head.argmax
text = open("src/foretell/bench/data/realedit/inventory.py").read()
ids = chat_prompt_ids(eng.tokenizer, "Add type hints:\n```python\n" + text + "\n```")
file_ids = eng.tokenizer.encode(text, add_special_tokens=False)
ctx = len(ids)
kv = SeqKV(r.kv_shape, ctx + 300, ctx + 300)
for i in range(0, ctx, 512):
    r.forward([Segment(kv, ids[i:i + 512], 1)]); kv.length = min(ctx, i + 512)
T = {}
served = []
orig = route.logits
route.logits = lambda x, w=None, out=None: (lambda res: served.append(res is not None) or res)(orig(x, w, out))
for rnd in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
    for n in (1, 2, 4, 8, 16, 32, 64):
        toks = file_ids[40:40 + n]  # a verify pass of the file's tokens: the rows the model is sure of
        for on in ((True, False) if rnd % 2 else (False, True)):
            head.argmax = route if on else None
            s = time.perf_counter(); out = r.forward([Segment(kv, toks, num_logits=n, argmax_only=True)], reuse_logits=True); dt = time.perf_counter() - s
            kv.length = ctx
            if rnd: T.setdefault((n, on), []).append(dt * 1000)
for n in (1, 2, 4, 8, 16, 32, 64):
    a, b = T[n, True], T[n, False]
    ratios = [x / y for x, y in zip(a, b)]
    print(f"n={n:3}: on {statistics.median(a):7.1f} ms off {statistics.median(b):7.1f} ms  on/off median {statistics.median(ratios):.3f} (min {min(ratios):.3f} max {max(ratios):.3f})")
print("route served", sum(served), "of", len(served))
