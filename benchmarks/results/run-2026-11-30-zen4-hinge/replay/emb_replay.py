"""Replay the embedded engine's draft policy on a real-edit output (the bench's foretell run), per step."""
import sys, os; sys.path.insert(0, os.path.dirname(__file__)); import patch_rw
import json, os, sys
from transformers import AutoTokenizer
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
from foretell.config import SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.core.simulate import simulate_policy
from foretell.core.tokens import TokenClasses
from foretell.core import policy as _policy
for kv in filter(None, os.environ.get("PRIORS", "").split(";")):
    k, v = kv.split("=")
    _policy.PRIORS[k] = eval(v)

tok = AutoTokenizer.from_pretrained(sys.argv[1])
res = json.load(open(sys.argv[2]))
names = sys.argv[3].split(",") if len(sys.argv) > 3 else None
cost = CostModel({int(k): v for k, v in res["meta"]["cost_curve"].items()})
classes = TokenClasses.from_tokenizer(tok)
eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions(max_tokens=384))}
out = {}
import math
ratios = []
for r in res["tasks"]:
    if names and r["name"].split("/")[-1] not in names:
        continue
    task = tasks[r["name"]]
    text = r["runs"]["foretell"]["text"]
    output = tok.encode(text, add_special_tokens=False)
    if r["runs"]["foretell"].get("finish_reason") == "stop":
        output.append(min(eos))
    def replay(spec):
        pol = DraftPolicy(make_proposer(task.prompt_ids, spec, classes), cost, True, trees=False, stop_ids=frozenset(eos))
        return simulate_policy(pol, output, 128, None, context=len(task.prompt_ids))
    ng = replay(SpeculationParams(prediction=None, method="ngram"))
    fo = replay(SpeculationParams(prediction=task.prediction_ids))
    ratios.append(ng.cost / fo.cost)
    print(f"{r['name']:24s} ngram {ng.passes:4d} p {ng.cost:7.1f} | foretell {fo.passes:4d} p {fo.cost:7.1f} | {ng.cost / fo.cost:.3f}  {fo.sources}")
print("geomean", math.exp(sum(map(math.log, ratios)) / len(ratios)), "min", min(ratios))
