"""Replays the draft policy on the real-edit outputs of four runs (0.5B and 1.5B, Sapphire Rapids and EPYC) with
some of its priors changed: simulated cost of n-gram lookup alone over that with the prediction, per run
(geomean, min). Run from the repository root: python benchmarks/results/realedit-1.5b-2026-11-26-spr/replay_priors.py"""
import json, math, sys, collections
from importlib import resources
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions
import foretell.core.prediction as prediction
import foretell.core.simulate as sim
from foretell.core.policy import DraftPolicy, PRIORS
from foretell.config import SpeculationParams
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
FILES = {"spr05": "benchmarks/results/run-2026-11-26-spr/results.json",
         "spr15": "benchmarks/results/realedit-1.5b-2026-11-26-spr/results.json",
         "epyc05": "benchmarks/results/run-2026-11-26-epyc-lean/results.json",
         "epyc15": "benchmarks/results/realedit-1.5b-2026-11-26-epyc-lean/results.json"}
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
items = []
for g, path in FILES.items():
    res = json.load(open(path))
    curve = CostModel({int(k): float(v) for k, v in res['meta']['cost_curve'].items() if int(k) > 1})
    for r in res['tasks']:
        if r['suite'] != 'realedit': continue
        t = tasks[r['name']]
        out = list(tok.encode(r['runs']['plain']['text'], add_special_tokens=False)) + [eos]
        items.append((g, r['name'], list(t.prompt_ids), list(t.prediction_ids), out, curve))
VARIANTS = {
    "base": {},
    "guess.05": {"prediction/guess": (0.05, 8.0)},
    "guess.01": {"prediction/guess": (0.01, 50.0)},
    "tent.3": {"prediction/tentative": (0.3, 4.0)},
    "reanch.6": {"prediction/reanchored": (0.6, 4.0)},
}
for vname, over in VARIANTS.items():
    priors = {**PRIORS, **over}
    by = collections.defaultdict(list)
    for g, name, prompt, pred, out, curve in items:
        c = {}
        for m in ("ngram", "auto"):
            p = DraftPolicy(prediction.make_proposer(prompt, SpeculationParams(prediction=pred if m == "auto" else None, method=m), classes), curve, priors=priors, stop_ids={eos})
            c[m] = sim.simulate_policy(p, out).cost
        by[g].append(c["ngram"] / c["auto"])
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    print(vname, " ".join(f"{g}: {gm(v):.4f} (min {min(v):.3f})" for g, v in by.items()), f"all {gm([x for v in by.values() for x in v]):.4f}", flush=True)
print("--- per task, base")
for g, name, prompt, pred, out, curve in items:
    c, src = {}, {}
    for m in ("ngram", "auto"):
        p = DraftPolicy(prediction.make_proposer(prompt, SpeculationParams(prediction=pred if m == "auto" else None, method=m), classes), curve, stop_ids={eos})
        r = sim.simulate_policy(p, out); c[m] = r.cost; src[m] = (r.passes, r.sources)
    if c["ngram"] / c["auto"] < 1.0:
        print(g, name, len(out), f"{c['ngram']/c['auto']:.3f}", f"ngram cost {c['ngram']:.1f} passes {src['ngram'][0]} {src['ngram'][1]}", f"| auto cost {c['auto']:.1f} passes {src['auto'][0]} {src['auto'][1]}")
