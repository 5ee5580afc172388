import json, sys, os
from foretell.core.adaptive_k import AttentionCost, CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.config import SpeculationParams
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
cache = json.load(open(os.environ["COST_JSON"]))  # a v6 cost cache file (points + attention)
points = {int(k): v for k, v in cache["points"].items()}
att = AttentionCost(**cache["attention"])
truth = CostModel(points, att)
model = truth if sys.argv[4] == "aware" else CostModel(points)
tok = load_tokenizer(resolve_model(None).path)
tasks = {t.name: t for t in build_tasks(tok, sys.argv[2].split(","), WorkloadOptions())[0]}
res = json.load(open(sys.argv[1]))
t = next(t for t in res["tasks"] if t["name"] == sys.argv[3])
task = tasks[t["name"]]
output = tok.encode(t["runs"]["foretell"]["text"], add_special_tokens=False)
spec = SpeculationParams(method="ngram") if sys.argv[5] == "ngram" else SpeculationParams(prediction=task.prediction_ids)
policy = DraftPolicy(make_proposer(task.prompt_ids, spec, TokenClasses.from_tokenizer(tok)), model, True, trees=False, stop_ids={tok.eos_token_id})
pos = 0
while pos < len(output):
    room = min(128, len(output) - pos - 1)
    d = policy.decide(room, context=len(task.prompt_ids) + pos)
    would = d.chosen.part.propose(min(d.chosen.limit, room)).tokens if d.chosen else []
    run = 0
    while run < len(would) and would[run] == output[pos + run]: run += 1
    hits = 0
    while hits < len(d.draft.tokens) and d.draft.tokens[hits] == output[pos + hits]: hits += 1
    emitted = output[pos:pos + hits + 1]
    print(f"pos {pos:5d} src {d.source:10s} ctx {d.chosen.context if d.chosen else '-':22s} a {d.chosen.alpha if d.chosen else 0:.3f} k {len(d.draft.tokens):3d} acc {hits:3d} could {run:3d}/{len(would)}")
    policy.record(d, emitted); policy.proposer.observe(emitted); pos += len(emitted)
