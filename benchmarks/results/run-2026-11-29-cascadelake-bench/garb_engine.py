"""In-engine: snake-verbatim with a garbage prediction against n-gram alone, alternating, per-step times."""
import sys, time, json, statistics
sys.path.insert(0, "benchmarks/results/run-2026-11-29-cascadelake-bench")
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.bench.workloads import control_tasks, WorkloadOptions
eng, _ = LLMEngine.from_config(EngineConfig())
tasks = {t.name: t for t in control_tasks(eng.tokenizer, WorkloadOptions())}
name = sys.argv[1] if len(sys.argv) > 1 else "controls/snake-verbatim:garbage"
t = tasks[name]
recs = []
eng.trace = recs.append
def run(arm):
    spec = SpeculationParams(method="auto", prediction=tuple(t.prediction_ids) if arm == "pred" else None)
    req = GenerationRequest(prompt_ids=list(t.prompt_ids), max_tokens=t.max_tokens, sampling=SamplingParams(temperature=0), speculation=spec)
    recs.clear(); t0 = time.perf_counter(); out = eng.generate([req]); dt = time.perf_counter() - t0
    return dt, list(recs)
run("none")
res = {"pred": [], "none": []}
for r in range(int(sys.argv[2]) if len(sys.argv) > 2 else 4):
    for arm in (("pred", "none") if r % 2 == 0 else ("none", "pred")):
        res[arm].append(run(arm))
for arm, v in res.items():
    print(arm, [round(x[0], 2) for x in v])
ratios = [n[0] / p[0] for p, n in zip(res["pred"], res["none"])]
print("none/pred per round", [round(x, 3) for x in ratios], "median", round(statistics.median(ratios), 3))
json.dump({a: [x[1] for x in v] for a, v in res.items()}, open("/tmp/garb_trace.json", "w"), default=str)
print(json.dumps(res["pred"][0][1][:3], default=str)[:1500])
