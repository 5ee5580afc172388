import json, sys, os
from foretell.core.adaptive_k import AttentionCost, CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.config import SpeculationParams
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
cache = json.load(open(os.environ["COST_JSON"]))
curve = CostModel({int(k): v for k, v in cache["points"].items()}, AttentionCost(**cache["attention"]))
tok = load_tokenizer(resolve_model(None).path)
tasks = {t.name: t for t in build_tasks(tok, ("verbatim", "realedit", "controls"), WorkloadOptions())[0]}
classes = TokenClasses.from_tokenizer(tok)
res = json.load(open(sys.argv[1]))
t = next(x for x in res["tasks"] if x["name"] == sys.argv[2])
task = tasks[t["name"]]
output = tok.encode(t["runs"]["foretell"]["text"], add_special_tokens=False)
spec = SpeculationParams(method="ngram") if sys.argv[3] == "ngram" else SpeculationParams(prediction=list(task.prediction_ids))
policy = DraftPolicy(make_proposer(task.prompt_ids, spec, classes), curve, True, trees=False, stop_ids={tok.eos_token_id}, draft_margin=float(os.environ.get("O", "0")))
pos, tot = 0, 0.0
while pos < len(output):
    ctx = len(task.prompt_ids) + pos
    room = min(128, len(output) - pos - 1)
    d = policy.decide(room, context=ctx)
    hits = 0
    while hits < len(d.draft.tokens) and d.draft.tokens[hits] == output[pos + hits]:
        hits += 1
    emitted = output[pos:pos + hits + 1]
    tot += d.cost
    opts = " ".join(f"{o.context}:{o.k}/{o.limit}@{o.alpha:.2f}" for o in d.options)
    print(f"pos {pos:4d} {d.chosen.context if d.chosen else '-':22s} k {len(d.draft.tokens):3d} hit {hits:3d} cost {d.cost:5.2f} tot {tot:6.1f} | {opts} {tok.decode(emitted)!r:.50}")
    policy.record(d, emitted); policy.proposer.observe(emitted)
    pos += len(emitted)
