"""Hindsight k applied to one context group at a time: how much of policy->best-k each accounts for."""
import math, sys, collections
sys.path.insert(0, "benchmarks/results/run-2026-11-29-cascadelake-bench")
from items import load, classes, eos, PANELS, SPR
import foretell.core.prediction as prediction
from foretell.core.policy import DraftPolicy, PRIORS
from foretell.config import SpeculationParams
from foretell.core.simulate import _common_prefix, _hindsight_draft
curve = {"panels": PANELS, "spr": SPR}[sys.argv[1] if len(sys.argv) > 1 else "panels"]
items = load(curve)
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
def run(pred, prompt, out, which, method="auto"):
    spec = SpeculationParams(prediction=pred if method == "auto" else None, method=method)
    p = DraftPolicy(prediction.make_proposer(prompt, spec, classes), curve, priors=PRIORS, stop_ids={eos})
    pos, cost = 0, 0.0
    while pos < len(out):
        room = min(128, len(out) - pos - 1)
        d = p.decide(room)
        ctxs = {o.context for o in d.options}
        ctx = d.chosen.context if d.chosen else "none"
        if which(ctx, ctxs):
            dr = _hindsight_draft(d, out, pos, room, "k")
            hits = len(dr.tokens); cost += curve.ratio(hits + 1)
        else:
            hits = _common_prefix(d.draft.tokens, out, pos) if d.draft.tokens else 0
            if d.branch is not None: hits = max(hits, _common_prefix(d.branch.tokens, out, pos))
            cost += d.cost
        emitted = out[pos:pos + hits + 1]
        p.record(d, emitted); p.proposer.observe(emitted); pos += len(emitted)
    return cost
base = {}
groups = {
  "none": lambda c, cs: False,
  "all": lambda c, cs: True,
  "aligned": lambda c, cs: c == "prediction/aligned",
  "ngram": lambda c, cs: c.startswith("ngram"),
  "ngram-when-pred-diverged": lambda c, cs: c.startswith("ngram") and "prediction/aligned" not in cs,
  "reanch/lead/start": lambda c, cs: c in ("prediction/reanchored", "prediction/lead", "prediction/start"),
  "pred-diverged": lambda c, cs: c.startswith("prediction/") and c not in ("prediction/aligned", "prediction/reanchored", "prediction/lead", "prediction/start"),
  "idle(none)": lambda c, cs: c == "none",
}
ng = {}
for g, name, prompt, pred, out, _ in items:
    ng[(g, name, len(out))] = run(pred, prompt, out, groups["none"], "ngram")
for gname, which in ([] if len(sys.argv) > 2 else groups.items()):
    rs = [ng[(g, name, len(out))] / run(pred, prompt, out, which) for g, name, prompt, pred, out, _ in items]
    print(f"{gname:28s} {gm(rs):.4f} min {min(rs):.3f}", flush=True)
for c0 in ("prediction/lead", "prediction/reanchored", "prediction/start", "prediction/quote", "prediction/tentative", "prediction/guess", "ngram/1", "ngram/2", "ngram/3", "ngram/4"):
    rs = [ng[(g, name, len(out))] / run(pred, prompt, out, lambda c, cs: c == c0) for g, name, prompt, pred, out, _ in items]
    print(f"{c0:28s} {gm(rs):.4f} min {min(rs):.3f}", flush=True)
