"""Replay variants of the tracker/policy on all recorded outputs, two Cascade Lake curves."""
import math, sys, collections, json
sys.path.insert(0, "benchmarks/results/run-2026-11-29-cascadelake-bench")
from items import load, classes, eos, PANELS
from foretell.core.adaptive_k import CostModel, AcceptanceTracker
import foretell.core.adaptive_k as ak
import foretell.core.prediction as prediction
import foretell.core.simulate as sim
import foretell.core.policy as pol
from foretell.config import SpeculationParams
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
B64 = CostModel({int(k): float(v) for k, v in json.load(open("benchmarks/results/run-2026-11-29-cascadelake-bench/bench05/results.json"))["meta"]["cost_curve"].items() if int(k) > 1})
E98 = CostModel({2: 1.0524, 3: 1.1517, 4: 1.2336, 8: 1.6933, 16: 2.5271, 17: 2.5271, 32: 4.2433, 33: 4.2433, 48: 6.2943, 49: 7.0088, 64: 8.3709, 65: 8.6311, 96: 12.1755, 97: 12.3021, 128: 15.4669, 129: 16.3057, 256: 32.7292})
CURVES = {"b64": B64, "e98": E98}
items = load()
def run_all(label, setup=lambda: None, teardown=lambda: None, policy_cls=pol.DraftPolicy):
    res = {}
    for cname, curve in CURVES.items():
        rs = []
        for g, name, prompt, pred, out, _ in items:
            c = {}
            for m in ("ngram", "auto"):
                if m == "auto": setup()
                spec = SpeculationParams(prediction=pred if m == "auto" else None, method=m)
                p = (policy_cls if m == "auto" else pol.DraftPolicy)(prediction.make_proposer(prompt, spec, classes), curve, stop_ids={eos}, trees=False)
                c[m] = sim.simulate_policy(p, out).cost
                if m == "auto": teardown()
            rs.append(c["ngram"] / c["auto"])
        res[cname] = rs
    print(f"{label:30s}", " ".join(f"{c}: {gm(v):.4f} (min {min(v):.3f})" for c, v in res.items()), flush=True)
    return res
if __name__ == "__main__":
    run_all("base")
