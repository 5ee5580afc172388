"""Replay the draft policy on recorded outputs (every task of a bench results.json), plain / ngram / prediction
specs, with policy variants. Cost in one-token passes on a cost curve, plus OVERHEAD per drafting pass."""
import json, sys, os, math
import numpy as np
from foretell.core.adaptive_k import AttentionCost, CostModel
import foretell.core.policy as P
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.config import SpeculationParams
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
from foretell.core.simulate import simulate_policy

cache = json.load(open(os.environ["COST_JSON"]))
curve = CostModel({int(k): v for k, v in cache["points"].items()}, AttentionCost(**cache["attention"]))
OVER = float(os.environ.get("OVERHEAD", "0"))
tok = load_tokenizer(resolve_model(None).path)
tasks = {t.name: t for t in build_tasks(tok, ("verbatim", "realedit", "controls"), WorkloadOptions())[0]}
classes = TokenClasses.from_tokenizer(tok)
eos = {tok.eos_token_id}
variants = sys.argv[2].split(",") if len(sys.argv) > 2 else ["base"]

class Counting(DraftPolicy):
    drafting_steps = 0
    def decide(self, *a, **k):
        d = super().decide(*a, **k)
        self.drafting_steps += bool(d.draft.tokens)
        return d

def run(task, output, spec, variant):
    kw = dict(x.split("=") for x in variant.split("+") if "=" in x)
    policy = Counting(make_proposer(task.prompt_ids, spec, classes), curve, True, trees=False, stop_ids=eos,
                      priors={**P.PRIORS, **({"prediction/moved": (float(kw["m"]), 4.0)} if "m" in kw else {})})
    r = simulate_policy(policy, output, 128, None, len(task.prompt_ids))
    drafting = policy.drafting_steps
    return r.cost + OVER * drafting, r.passes

res = json.load(open(sys.argv[1]))
rows = {}
for t in res["tasks"]:
    task = tasks.get(t["name"])
    if task is None:
        continue
    output = tok.encode(t["runs"]["foretell"]["text"], add_special_tokens=False)
    for v in variants:
        ng = run(task, output, SpeculationParams(method="ngram"), v)
        pr = run(task, output, SpeculationParams(prediction=task.prediction_ids)) if False else None
        spec = SpeculationParams(prediction=list(task.prediction_ids)) if task.prediction_ids else SpeculationParams(method="ngram")
        pr = run(task, output, spec, v)
        rows.setdefault(v, []).append((t["name"], len(output), ng, pr))
for v, rs in rows.items():
    print("==", v)
    for name, n, ng, pr in rs:
        print(f"  {name:40s} n {n:4d} ngram {ng[0]:7.1f} ({ng[1]:4d}) pred {pr[0]:7.1f} ({pr[1]:4d})  ngram/plain {n/ng[0]:.3f} pred/plain {n/pr[0]:.3f} pred/ngram {ng[0]/pr[0]:.3f}")
    edits = [ng[0] / pr[0] for name, n, ng, pr in rs if name.startswith("realedit")]
    print(f"  realedit geomean pred/ngram {math.exp(np.mean(np.log(edits))):.4f}  min over all pred/ngram {min(ng[0]/pr[0] for _, _, ng, pr in rs):.3f} min ngram/plain {min(n/ng[0] for _, n, ng, _ in rs):.3f} min pred/plain {min(n/pr[0] for _, n, _, pr in rs):.3f}")
