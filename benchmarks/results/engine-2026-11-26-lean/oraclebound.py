"""Lower bound on decode cost of any copy-based lossless drafter (runs copied from prediction, prompt, output so far),
by DP over the cost curve; compared with n-gram lookup's and our policy's simulated cost."""
import sys, math, collections
sys.path.insert(0, "tmp")
from simcorpus import load, classes, eos
import foretell.core.prediction as prediction
from foretell.core.policy import DraftPolicy
import foretell.core.simulate as sim
from foretell.config import SpeculationParams
def runs(prompt, pred, out, cap=256):
    static = sim.SuffixAutomaton([t for src in (pred, prompt) for t in [*src, -1]])
    return [max(static.longest_match(out, i, cap), sim._longest_in_prefix(out, i, cap)) for i in range(len(out))]
def dp(out, r, curve):
    n = len(out); best = [math.inf] * (n + 1); best[n] = 0.0
    for i in range(n - 1, -1, -1):
        top = min(r[i], n - i - 1)
        best[i] = min(curve.ratio(d + 1) + best[min(n, i + d + 1)] for d in range(top + 1))
    return best[0]
groups = collections.defaultdict(list)
for g, name, prompt, pred, out, curve in load(("r05", "r15", "held")):
    r = runs(prompt, pred, out)
    o = dp(out, r, curve)
    c = {}
    for m in ("ngram", "auto"):
        p = DraftPolicy(prediction.make_proposer(prompt, SpeculationParams(prediction=pred if m == "auto" else None, method=m), classes), curve, stop_ids={eos})
        c[m] = sim.simulate_policy(p, out).cost
    groups[g].append((name, len(out), o, c["ngram"], c["auto"]))
    print(f"{g} {name:22s} out {len(out):5d} plain {len(out):6.0f} oracle {o:7.1f} ngram {c['ngram']:7.1f} auto {c['auto']:7.1f}  bound ngram/oracle {c['ngram']/o:.2f}  auto/oracle {c['auto']/o:.2f}", flush=True)
for g, rows in groups.items():
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    print(g, "geomean ngram/oracle (max possible speedup over n-gram, decode only)", round(gm([n / o for _, _, o, n, a in rows]), 3),
          " ours/ngram", round(gm([n / a for _, _, o, n, a in rows]), 3), " oracle eff by cost", round(gm([o / a for _, _, o, n, a in rows]), 3))
print("--- oracle copying only runs of >= MIN tokens")
import os
for MIN in (2, 3, 4):
    res = collections.defaultdict(list)
    for g, name, prompt, pred, out, curve in load(("r05", "r15", "held")):
        r = [x if x >= MIN else 0 for x in runs(prompt, pred, out)]
        o = dp(out, r, curve)
        row = [x for x in groups[g] if x[0] == name][0]
        res[g].append((o, row[3], row[4]))
    for g, rows in res.items():
        gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
        print(MIN, g, "ngram/oracle", round(gm([n / o for o, n, a in rows]), 3), "ours/oracle", round(gm([a / o for o, n, a in rows]), 3), "min ngram/oracle", round(min(n / o for o, n, a in rows), 3))
