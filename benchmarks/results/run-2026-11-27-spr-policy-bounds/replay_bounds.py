"""Where the draft policy loses time against n-gram lookup: the policy replayed (no model) on the recorded real
outputs of six runs (0.5B and 1.5B real edits on Sapphire Rapids and EPYC, 0.5B long files), each on its own
run's cost curve, one request alone, chains only (exact mode), against n-gram lookup's replay of the same output:

    policy        the prediction's draft policy as it runs
    best k        the same, the part it ranked first drafting exactly as far as its draft matches
    best source   the same, the part whose draft matches furthest drafting exactly that far
    no over-draft (long / other contexts): the policy's own k, but a draft that fails stops right after the
                  failure, only in the contexts of long runs (aligned, lead, re-anchored, anchored, rejoin,
                  n-gram/4) or only in the others (what rejected draft tokens cost)

    .venv/bin/python benchmarks/results/run-2026-11-27-spr-policy-bounds/replay_bounds.py"""
import collections
import json
import math

from foretell.config import SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.core.simulate import simulate_policy
from foretell.core.tokens import TokenClasses
from foretell.bench.workloads import WorkloadOptions, longfile_tasks, realedit_tasks
from foretell.models.loader import load_tokenizer, resolve_model

RUNS = {"0.5B SPR a": "benchmarks/results/run-2026-11-27-spr-amx/results.json",
        "0.5B SPR b": "benchmarks/results/run-2026-11-27-spr-amx/final/results.json",
        "1.5B SPR": "benchmarks/results/realedit-1.5b-2026-11-27-spr-amx/results.json",
        "0.5B EPYC": "benchmarks/results/run-2026-11-26-epyc-lean/results.json",
        "1.5B EPYC": "benchmarks/results/realedit-1.5b-2026-11-26-epyc-lean/results.json",
        "0.5B SPR long files": "benchmarks/results/longfile-0.5b-2026-11-27-spr-exact/results.json"}
LONG = {"prediction/aligned", "prediction/lead", "prediction/reanchored", "prediction/anchored", "prediction/rejoin",
        "ngram/4"}

tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions()) + longfile_tasks(tok, WorkloadOptions())}


def policy(task, curve, prediction=True):
    spec = SpeculationParams(prediction=task.prediction_ids) if prediction else SpeculationParams(method="ngram")
    return DraftPolicy(make_proposer(task.prompt_ids, spec, classes), curve, stop_ids={eos}, trees=False)


def no_over_draft(task, curve, out, long_contexts):
    """The policy's own decisions; a draft in the chosen contexts is paid only up to its first rejected token."""
    p, pos, cost = policy(task, curve), 0, 0.0
    while pos < len(out):
        d = p.decide(min(128, len(out) - pos - 1))
        k, m = len(d.draft.tokens), 0
        while m < k and pos + m < len(out) and d.draft.tokens[m] == out[pos + m]:
            m += 1
        context = d.chosen.context if d.chosen is not None and k else None
        if context is not None and (context in LONG) == long_contexts:
            k = min(k, m + 1)
        emitted = out[pos:pos + m + 1]
        p.record(d, emitted)
        p.proposer.observe(emitted)
        cost, pos = cost + curve.ratio(k + 1), pos + len(emitted)
    return cost


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


LABELS = ["policy", "best k", "best source", "no over-draft (long)", "no over-draft (other)"]
rows, everything = collections.defaultdict(list), []
for group, path in RUNS.items():
    result = json.load(open(path))
    curve = CostModel({int(n): float(r) for n, r in result["meta"]["cost_curve"].items() if int(n) > 1})
    for r in result["tasks"]:
        if r["suite"] not in ("realedit", "longfile"):
            continue
        task = tasks[r["name"]]
        out = list(tok.encode(r["runs"]["plain"]["text"], add_special_tokens=False)) + [eos]
        ngram = simulate_policy(policy(task, curve, prediction=False), out).cost
        costs = [simulate_policy(policy(task, curve), out, hindsight=h).cost for h in (None, "k", "source")]
        costs += [no_over_draft(task, curve, out, True), no_over_draft(task, curve, out, False)]
        ratios = [ngram / c for c in costs]
        rows[group].append(ratios)
        everything.append(ratios)
print("replayed cost of n-gram lookup alone / each (geomean over the run's tasks):")
print(f"{'run':22s} " + "  ".join(f"{label:>21s}" for label in LABELS))
for group, ratios in list(rows.items()) + [("all 48", everything)]:
    print(f"{group:22s} " + "  ".join(f"{geomean([r[i] for r in ratios]):21.3f}" for i in range(len(LABELS))))
