import json, sys
from transformers import AutoTokenizer
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
from foretell.config import SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.core.policy import DraftPolicy, common_prefix
from foretell.core.prediction import make_proposer
from foretell.core.tokens import TokenClasses
tok = AutoTokenizer.from_pretrained(sys.argv[1])
res = json.load(open(sys.argv[2]))
name = sys.argv[3]
cost = CostModel({int(k): v for k, v in res["meta"]["cost_curve"].items()})
classes = TokenClasses.from_tokenizer(tok)
eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
task = {t.name: t for t in realedit_tasks(tok, WorkloadOptions(max_tokens=384))}[name]
r = [x for x in res["tasks"] if x["name"] == name][0]
output = tok.encode(r["runs"]["foretell"]["text"], add_special_tokens=False)
if r["runs"]["foretell"].get("finish_reason") == "stop":
    output.append(min(eos))
for label, spec in (("ngram", SpeculationParams(prediction=None, method="ngram")), ("foretell", SpeculationParams(prediction=task.prediction_ids))):
    pol = DraftPolicy(make_proposer(task.prompt_ids, spec, classes), cost, True, trees=False, stop_ids=frozenset(eos))
    pos = 0; total = 0.0; print("==", label)
    while pos < len(output):
        room = min(128, len(output) - pos - 1)
        d = pol.decide(room, context=len(task.prompt_ids) + pos)
        m = common_prefix(d.draft.tokens, output[pos:])
        emitted = output[pos:pos + m + 1]
        opts = " ".join(f"{o.context}:k{o.k}/a{o.alpha:.2f}" for o in d.options)
        print(f"  at {pos:4d} {d.draft.source if d.draft.tokens else '-':11s} k {len(d.draft):3d} acc {m:3d} cost {d.cost:5.2f} | {opts} | next {tok.decode(output[pos+m:pos+m+1])!r}")
        pol.record(d, emitted); pol.proposer.observe(emitted); pos += len(emitted); total += d.cost
    print("  total", round(total, 1))
# debug: the foretell draft at a position
if len(sys.argv) > 4:
    at = int(sys.argv[4])
    pol = DraftPolicy(make_proposer(task.prompt_ids, SpeculationParams(prediction=task.prediction_ids), classes), cost, True, trees=False, stop_ids=frozenset(eos))
    pos = 0
    while pos < len(output):
        room = min(128, len(output) - pos - 1)
        d = pol.decide(room, context=len(task.prompt_ids) + pos)
        m = common_prefix(d.draft.tokens, output[pos:])
        if pos == at:
            print("draft", [tok.decode([x]) for x in d.draft.tokens])
            print("output", [tok.decode([x]) for x in output[pos:pos + len(d.draft)]])
            al = pol.proposer.aligner
            print("rewrites", getattr(al, "_rewrites", None).__dict__ if hasattr(al, "_rewrites") else None)
        emitted = output[pos:pos + m + 1]
        pol.record(d, emitted); pol.proposer.observe(emitted); pos += len(emitted)
