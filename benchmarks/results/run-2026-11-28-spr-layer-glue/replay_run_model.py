"""A per-run model of aligned acceptance, replayed (no model) on recorded real-edit outputs against the current tracker.

The 48 outputs: five real-edit runs (0.5B and 1.5B, Sapphire Rapids and EPYC) and one long-file run, each replayed
on its run's cost curve: n-gram lookup alone, the prediction's policy as it is, and the policy with RunTracker (a
population of per-run acceptance rates learnt by online EM from the runs that ended; the current run's rate from its
age) in place of AcceptanceTracker for the aligned contexts, in several settings. Prints the geomean of n-gram
lookup's replayed cost over the prediction's, over all and per run. Result (2026-11-28): 1.1639 as it is, at best
1.1647 with the run model: no gain, not adopted.

    .venv/bin/python benchmarks/results/run-2026-11-28-spr-layer-glue/replay_run_model.py
"""
import collections, json, math, sys, numpy as np
from foretell.config import SpeculationParams
from foretell.core.adaptive_k import CostModel, AcceptanceTracker, _grid_powers, _grid_logs, alpha_grid
from foretell.core import policy as policy_mod
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.core.simulate import simulate_policy
from foretell.core.tokens import TokenClasses
from foretell.bench.workloads import WorkloadOptions, longfile_tasks, realedit_tasks
from foretell.models.loader import load_tokenizer, resolve_model
RUNS = {"0.5B SPR new": "benchmarks/results/run-2026-11-28-spr-gqa-attention/bench/results.json",
        "0.5B SPR a": "benchmarks/results/run-2026-11-27-spr-amx/results.json",
        "1.5B SPR": "benchmarks/results/realedit-1.5b-2026-11-27-spr-amx/results.json",
        "0.5B EPYC": "benchmarks/results/run-2026-11-26-epyc-lean/results.json",
        "1.5B EPYC": "benchmarks/results/realedit-1.5b-2026-11-26-epyc-lean/results.json",
        "0.5B long": "benchmarks/results/longfile-0.5b-2026-11-27-spr-exact/results.json"}
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions()) + longfile_tasks(tok, WorkloadOptions())}
CASES = []
for group, path in RUNS.items():
    result = json.load(open(path))
    curve = CostModel({int(n): float(r) for n, r in result["meta"]["cost_curve"].items() if int(n) > 1})
    for r in result["tasks"]:
        if r["suite"] not in ("realedit", "longfile"): continue
        task = tasks[r["name"]]
        out = list(tok.encode(r["runs"]["plain"]["text"], add_special_tokens=False)) + [eos]
        CASES.append((group, r["name"], curve, task, out))

def run(spec_fn, tracker_factory=None):
    res = {}
    orig = DraftPolicy.tracker
    if tracker_factory:
        def tracker(self, context):
            found = self.trackers.get(context)
            if found is None:
                found = tracker_factory(self, context) or orig(self, context)
                self.trackers[context] = found
            return found
        DraftPolicy.tracker = tracker
    try:
        for group, name, curve, task, out in CASES:
            p = DraftPolicy(make_proposer(task.prompt_ids, spec_fn(task), classes), curve, stop_ids={eos}, trees=False)
            r = simulate_policy(p, out, 128)
            res[(group, name)] = (r.passes, r.cost)
    finally:
        DraftPolicy.tracker = orig
    return res

def summary(label, base, ngram):
    by = collections.defaultdict(list)
    for key, (passes, cost) in base.items():
        by[key[0]].append(math.log(ngram[key][1] / cost))
    allv = [v for vs in by.values() for v in vs]
    print(f"{label:30s} all {math.exp(np.mean(allv)):.4f} min {math.exp(min(allv)):.3f} | " + " ".join(f"{g.split()[0]}{g.split()[1][:3]}:{math.exp(np.mean(v)):.3f}" for g, v in by.items()), flush=True)
    return allv

ngram = run(lambda t: SpeculationParams())
base = run(lambda t: SpeculationParams(prediction=t.prediction_ids))
summary("current", base, ngram)

class RunTracker(AcceptanceTracker):
    """population G over per-run alpha (online EM), current run: G * alpha^age"""
    eta: float = 0.3
    def __post_init__(self):
        super().__post_init__()
        self.pop = self.weights.copy(); self.age = 0
    def record(self, proposed, accepted):
        if proposed == 0:
            self.idle_steps += 1; return
        self.idle_steps = 0
        self.fruitless_steps = self.fruitless_steps + 1 if accepted == 0 else 0
        log_a, log_m = _grid_logs(); log_a = np.maximum(log_a, -1e6); log_m = np.maximum(log_m, -1e6)
        if accepted == proposed:
            self.age += accepted
        else:
            length = self.age + accepted
            ll = length * log_a + log_m
            post = self.pop * np.exp(ll - ll.max()); post /= post.sum()
            self.pop = (1 - self.eta) * self.pop + self.eta * post
            self.age = 0
        ll = self.age * log_a
        w = self.pop * np.exp(ll - ll.max())
        self._believe(w / w.sum())

for ctxs in [{"prediction/aligned"}, {"prediction/aligned", "prediction/reanchored", "prediction/rejoin", "prediction/lead"}]:
  for eta in (0.1, 0.3, 0.6):
    for prior in [None, (0.9, 1.0), (0.95, 0.5)]:
        def factory(self, context, eta=eta, prior=prior, ctxs=ctxs):
            if context not in ctxs: return None
            p = self.priors.get(context, 0.6)
            mean, weight = p if isinstance(p, tuple) else (p, 2.0)
            if prior: mean, weight = prior
            t = RunTracker(prior_alpha=mean, prior_weight=weight); t.eta = eta
            return t
        r = run(lambda t: SpeculationParams(prediction=t.prediction_ids), factory)
        summary(f"{len(ctxs)} eta={eta} prior={prior}", r, ngram)
