import sys, time, json
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt, prediction_text
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
eng, _ = LLMEngine.from_config(EngineConfig())
print("curve", eng.cost.points if hasattr(eng.cost, "points") else None)
name = sys.argv[1]
instr, f, style = tasks[name]
ids = eng.tokenizer.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
pred = tuple(eng.tokenizer.encode(prediction_text(f, style)))
recs = []
eng.trace = recs.append
def run(arm):
    spec = SpeculationParams(method="auto", prediction=pred if arm == "pred" else None)
    req = GenerationRequest(prompt_ids=ids, max_tokens=2048, sampling=SamplingParams(temperature=0), speculation=spec)
    recs.clear(); t = time.perf_counter(); out = eng.generate([req]); dt = time.perf_counter() - t
    return dt, list(recs)
run("none")  # warm the prefix cache
res = {}
for r in range(2):
    for arm in (("pred", "none") if r % 2 == 0 else ("none", "pred")):
        dt, rs = run(arm); res.setdefault(arm, []).append((dt, rs))
for arm, v in res.items():
    dt, rs = v[0]
    print(arm, [round(x[0], 2) for x in v], "steps", len(rs))
    for x in rs[:60]:
        print("  ", {k: x.get(k) for k in ("source", "k", "accepted", "cost", "expected", "reason", "seconds", "context") if k in x})
json.dump({a: [x[1] for x in v] for a, v in res.items()}, open(f"/tmp/trace-{name}.json", "w"))
