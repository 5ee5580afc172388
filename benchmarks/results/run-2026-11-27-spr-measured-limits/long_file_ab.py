"""The same long-file request in-engine (prefix cache on and warmed, calibrator off): arms "flat:auto" (the
start-up curve, with the prediction), "flat:ngram" (no prediction), and "ctx:..." (the curve priced for the
request's context). The ctx arms need context_cost.patch applied (tried, not kept).

    .venv/bin/python long_file_ab.py /tmp/spines.py "Rename the method `set_patch_arc` to `set_arc_patch` everywhere." 6000 flat:auto,ctx:auto,flat:ngram,ctx:ngram 2
"""
import time, sys, statistics
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.core.adaptive_k import CostModel
engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=True))
engine.calibrator = None
ctx_cost = engine.cost
flat_cost = CostModel(dict(ctx_cost.points))
recs = []; engine.trace = recs.append
tok = engine.tokenizer
code = open(sys.argv[1]).read()
instr = sys.argv[2]
msg = [{"role": "user", "content": instr + " Reply with the whole file only, in one code block.\n\n```python\n" + code + "```"}]
prompt = tok.apply_chat_template(msg, add_generation_prompt=True, tokenize=True)
prompt = list(prompt["input_ids"]) if hasattr(prompt, "keys") else list(prompt)
pred = tok.encode(code)
def run(method="auto", p=pred):
    recs.clear()
    req = GenerationRequest(prompt_ids=prompt, max_tokens=int(sys.argv[3]), sampling=SamplingParams(temperature=0.0),
                            speculation=SpeculationParams(prediction=p, method=method))
    t = time.perf_counter(); out = engine.generate([req])[req.request_id]; dt = time.perf_counter() - t
    return dt, len(recs), hash(tuple(x for c in out for x in c.new_token_ids)), sum(len(c.new_token_ids) for c in out)
engine.cost = flat_cost; print("warm", run(), flush=True)
res = {}
arms = sys.argv[4].split(",")
for rnd in range(int(sys.argv[5])):
    for arm in arms:
        which, method = arm.split(":")
        engine.cost = ctx_cost if which == "ctx" else flat_cost
        r = run(method, pred if method != "ngram" else None)
        res.setdefault(arm, []).append(r)
        print(rnd, arm, f"{r[0]:.1f}s passes={r[1]} tokens={r[3]} hash={r[2]}", flush=True)
for arm, v in res.items(): print(arm, "median", round(statistics.median(x[0] for x in v), 2), "passes", [x[1] for x in v])
if len(sys.argv) > 6:
    for which in ("flat", "ctx"):
        engine.cost = ctx_cost if which == "ctx" else flat_cost
        run()
        print(which, [(r.get("pos"), r.get("k"), r.get("accepted")) for r in recs])
