"""Trace one realedit output of a results.json under a VARIANT (prediction arm only)."""
import sys, os, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import variants
variants.apply(os.environ.get("VARIANT", ""))
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
from foretell.config import SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.core.policy import DraftPolicy, common_prefix
from foretell.core.prediction import make_proposer
tok = load_tokenizer(resolve_model("default").path)
res = json.load(open(sys.argv[1])); name = sys.argv[2]
cost = CostModel({int(k): float(v) for k, v in res["meta"]["cost_curve"].items() if int(k) > 1})
classes = TokenClasses.from_tokenizer(tok)
eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
task = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}["realedit/" + name]
r = [x for x in res["tasks"] if x["name"] == "realedit/" + name][0]
run = r["runs"].get("foretell") or r["runs"]["plain"]
output = tok.encode(run["text"], add_special_tokens=False) + [min(eos)]
pol = DraftPolicy(make_proposer(task.prompt_ids, SpeculationParams(prediction=task.prediction_ids), classes), cost, True, trees=False, stop_ids=frozenset(eos))
pos = 0; total = 0.0
while pos < len(output):
    room = min(128, len(output) - pos - 1)
    d = pol.decide(room, context=len(task.prompt_ids) + pos)
    m = common_prefix(d.draft.tokens, output[pos:])
    emitted = output[pos:pos + m + 1]
    if d.draft.tokens:
        print(f"at {pos:4d} {d.draft.source:10s} {d.chosen.context:22s} k {len(d.draft):3d} acc {m:3d} cost {d.cost:5.2f} next {tok.decode(output[pos+m:pos+m+1])!r}")
    pol.record(d, emitted); pol.proposer.observe(emitted); pos += len(emitted); total += d.cost
print("total", round(total, 1))
al = pol.proposer.aligner
print("lstats", {tok.decode([h]) if h is not None else None: v for h, v in getattr(al, "_lstats", {}).items()})
