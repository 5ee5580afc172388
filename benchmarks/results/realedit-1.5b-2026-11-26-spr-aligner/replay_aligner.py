"""Replays the draft policy on the plain-decoding outputs of four real-edit runs (0.5B and 1.5B, Sapphire Rapids
and EPYC, each run's own cost curve): simulated cost of n-gram lookup alone over that with the prediction, per
run (geomean, min) and per task, and the aligner's simulated efficiency (k = 64) there and on the packaged
recording. Deterministic, no model. Run from the repository root:
python benchmarks/results/realedit-1.5b-2026-11-26-spr-aligner/replay_aligner.py"""
import json, math, collections
from importlib import resources
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions
import foretell.core.prediction as prediction
import foretell.core.simulate as sim
from foretell.core.policy import DraftPolicy
from foretell.config import SpeculationParams

tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
FILES = {"spr05": "benchmarks/results/run-2026-11-26-spr/results.json",
         "spr15": "benchmarks/results/realedit-1.5b-2026-11-26-spr/results.json",
         "epyc05": "benchmarks/results/run-2026-11-26-epyc-lean/results.json",
         "epyc15": "benchmarks/results/realedit-1.5b-2026-11-26-epyc-lean/results.json"}
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
by, per, eff = collections.defaultdict(list), {}, [0, 0]
for g, path in FILES.items():
    res = json.load(open(path))
    curve = CostModel({int(k): float(v) for k, v in res["meta"]["cost_curve"].items() if int(k) > 1})
    for r in res["tasks"]:
        if r["suite"] != "realedit":
            continue
        t = tasks[r["name"]]
        out = list(tok.encode(r["runs"]["plain"]["text"], add_special_tokens=False)) + [eos]
        prompt, pred = list(t.prompt_ids), list(t.prediction_ids)
        cost = {}
        for method in ("ngram", "auto"):
            spec = SpeculationParams(prediction=pred if method == "auto" else None, method=method)
            policy = DraftPolicy(prediction.make_proposer(prompt, spec, classes), curve, stop_ids={eos})
            cost[method] = sim.simulate_policy(policy, out).cost
        by[g].append(cost["ngram"] / cost["auto"])
        per[f"{g} {r['name']}"] = cost["ngram"] / cost["auto"]
        c = sim.compare(pred, out, lambda: prediction.PredictionProposer(pred, newline_ids=classes.newline))
        eff[0] += c.oracle.passes
        eff[1] += c.ours.passes
recorded = json.loads(resources.files("foretell.bench.data").joinpath("recorded_outputs.json").read_text())
reff = [0, 0]
for t in recorded["tasks"] if isinstance(recorded, dict) else recorded:
    c = sim.compare(t["prediction_ids"], t["output_ids"],
                    lambda: prediction.PredictionProposer(t["prediction_ids"], newline_ids=classes.newline))
    reff[0] += c.oracle.passes
    reff[1] += c.ours.passes
print(" ".join(f"{g}: {gm(v):.4f} (min {min(v):.3f})" for g, v in by.items()),
      f"all {gm([x for v in by.values() for x in v]):.4f}")
print(f"aligner efficiency (k=64): real-edit outputs {eff[0]}/{eff[1]} = {eff[0] / eff[1]:.4f}; "
      f"recording {reff[0]}/{reff[1]} = {reff[0] / reff[1]:.4f}")
for name, ratio in per.items():
    print(f"{name:32s} {ratio:.3f}")
