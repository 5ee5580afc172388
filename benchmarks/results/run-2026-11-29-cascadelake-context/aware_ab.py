"""In one engine, the start-up curve fixed (no calibrator), drafts priced at the context (aware) or by the curve
alone (blind), the arms alternating per request: wall time and passes per task."""
import sys, time, statistics, math
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, build_tasks
eng, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False))
eng.calibrator = None
aware = eng.cost
blind = CostModel(aware.points)
print("attention", aware.attention, flush=True)
names = sys.argv[1].split(",")
rounds = int(sys.argv[2])
tasks = {t.name: t for t in build_tasks(eng.tokenizer, sorted({n.split("/")[0] for n in names}), WorkloadOptions())[0]}
res = {}
for r in range(rounds):
    for name in names:
        task = tasks[name]
        for arm in (("aware", "blind") if r % 2 == 0 else ("blind", "aware")):
            eng.cost = aware if arm == "aware" else blind
            spec = SpeculationParams(prediction=task.prediction_ids) if task.prediction_ids else SpeculationParams(method="ngram")
            req = GenerationRequest(prompt_ids=task.prompt_ids, max_tokens=task.max_tokens, sampling=SamplingParams(temperature=0.0), speculation=spec)
            t = time.perf_counter()
            outs = eng.generate([req])[req.request_id]
            dt = time.perf_counter() - t
            toks = [x for o in outs for x in o.new_token_ids]
            res.setdefault(name, {}).setdefault(arm, []).append((dt, outs[-1].stats.forward_passes, toks))
        a, b = res[name]["aware"][-1], res[name]["blind"][-1]
        print(f"{name:36s} aware {a[0]:6.2f} s {a[1]:4d} passes  blind {b[0]:6.2f} s {b[1]:4d}  a/b {a[0]/b[0]:.3f} same {a[2] == b[2]}", flush=True)
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
for name, v in res.items():
    print(f"{name:36s} aware/blind geomean {gm([a[0]/b[0] for a, b in zip(v['aware'], v['blind'])]):.3f}")
print("all", f"{gm([a[0]/b[0] for v in res.values() for a, b in zip(v['aware'], v['blind'])]):.3f}")
