"""Replay the draft policy on recorded outputs (bench results.json: text of the foretell run), priced blind to
the context (the curve alone) and at each request's context; both charged on the context-aware 'truth'."""
import json, sys, glob, os
from foretell.core.adaptive_k import AttentionCost, CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.config import SpeculationParams
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
from foretell.core.simulate import _hindsight_draft

cache = json.load(open(os.environ["COST_JSON"]))  # a v6 cost cache file (points + attention)
points = {int(k): v for k, v in cache["points"].items()}
att = AttentionCost(**cache["attention"])
truth, blind = CostModel(points, att), CostModel(points)
tok = load_tokenizer(resolve_model(None).path)
suites = sys.argv[2].split(",")
tasks = {t.name: t for t in build_tasks(tok, suites, WorkloadOptions())[0]}
res = json.load(open(sys.argv[1]))
classes = TokenClasses.from_tokenizer(tok)
eos = {tok.eos_token_id}
tot = {}
for t in res["tasks"]:
    task = tasks.get(t["name"])
    if task is None or not task.prediction_ids:
        continue
    output = tok.encode(t["runs"]["foretell"]["text"], add_special_tokens=False)
    for label, spec in (("ngram", SpeculationParams(method="ngram")), ("pred", SpeculationParams(prediction=task.prediction_ids))):
        row = []
        for name, model, hs in (("blind", blind, None), ("aware", truth, None), ("hind-k", truth, "k"), ("hind-src", truth, "source")):
            policy = DraftPolicy(make_proposer(task.prompt_ids, spec, classes), model, True, trees=False, stop_ids=eos)
            pos, cost, passes = 0, 0.0, 0
            while pos < len(output):
                ctx = len(task.prompt_ids) + pos
                room = min(128, len(output) - pos - 1)
                d = policy.decide(room, context=ctx)
                draft = d.draft if hs is None else _hindsight_draft(d, output, pos, room, hs)
                hits = 0
                while hits < len(draft.tokens) and pos + hits < len(output) and draft.tokens[hits] == output[pos + hits]:
                    hits += 1
                emitted = output[pos:pos + hits + 1]
                policy.record(d, emitted); policy.proposer.observe(emitted)
                cost += truth.at(ctx).ratio(len(draft.tokens) + 1); passes += 1; pos += len(emitted)
            row.append((cost, passes))
            tot.setdefault((label, name), []).append(cost)
        print(f"{t['name']:28s} {label:6s} prompt {len(task.prompt_ids):5d} out {len(output):5d}  " + "  ".join(f"{c:7.1f} ({p})" for c, p in row), flush=True)
for k, v in tot.items():
    print(k, f"{sum(v):.1f}")
