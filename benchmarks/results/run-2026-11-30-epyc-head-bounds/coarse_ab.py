"""Engine A/B: greedy generation with the coarse head route on vs off (same process, two engines? no: toggle)."""
import time, statistics, sys, torch
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.bench.workloads import chat_prompt_ids
eng = LLMEngine.from_config(EngineConfig(max_num_seqs=1))[0]
head = eng.runner.model.lm_head
route = head.argmax
served = []
orig = route.logits
def counted(x, w=None, out=None):
    r = orig(x, w, out); served.append((x.reshape(-1, 896).shape[0], r is not None)); return r
route.logits = counted
tasks = [("inventory.py", "Add type hints to every function. Reply with the whole file."),
         ("stats.py", "Rename the function mean to average everywhere. Reply with the whole file."),
         ("cart.js", "Replace var with const or let. Reply with the whole file.")]
res = {}
for rnd in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    for name, instr in tasks:
        text = open(f"src/foretell/bench/data/realedit/{name}").read()
        ids = chat_prompt_ids(eng.tokenizer, instr + "\n\n```\n" + text + "\n```")
        pred = tuple(eng.tokenizer.encode(text, add_special_tokens=False))
        for method, p in (("none", None), ("ngram", None), ("auto", pred)):
            for on in ((True, False) if rnd % 2 == 0 else (False, True)):
                head.argmax = route if on else None
                req = GenerationRequest(prompt_ids=ids, max_tokens=300, sampling=SamplingParams(temperature=0),
                                        speculation=SpeculationParams(prediction=p, method=method))
                t = time.perf_counter(); out = eng.generate([req])[req.request_id]; dt = time.perf_counter() - t
                toks = [t for o in out for t in o.new_token_ids]
                res.setdefault((name, method, on), []).append((dt, toks))
head.argmax = route
for (name, method, on), v in sorted(res.items()):
    if not on: continue
    off = res[name, method, False]
    same = all(a[1] == v[0][1] for a in v + off)
    r = [b[0] / a[0] for a, b in zip(v, off)]
    print(f"{name:13} {method:6} on {statistics.median(a[0] for a in v):6.2f}s off {statistics.median(a[0] for a in off):6.2f}s  off/on {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f}) same={same} tokens {len(v[0][1])}")
ok = sum(1 for _, o in served if o); print("route served", ok, "of", len(served), "head calls; rows of served:", sorted({m for m, o in served if o})[-5:])
