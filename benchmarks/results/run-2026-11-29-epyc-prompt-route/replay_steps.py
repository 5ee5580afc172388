"""Replay the policy on recorded outputs; per-step dump for one task (pred arm): context, k, hits, cost."""
import json, sys, os
from foretell.core.adaptive_k import AttentionCost, CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.config import SpeculationParams
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
from foretell.core.simulate import _hindsight_draft

cache = json.load(open(os.environ["COST_JSON"]))
truth = CostModel({int(k): v for k, v in cache["points"].items()}, AttentionCost(**cache["attention"]))
tok = load_tokenizer(resolve_model(None).path)
tasks = {t.name: t for t in build_tasks(tok, ("realedit",), WorkloadOptions())[0]}
res = json.load(open(sys.argv[1]))
show = sys.argv[2] if len(sys.argv) > 2 else None
classes = TokenClasses.from_tokenizer(tok)
eos = {tok.eos_token_id}
tot = {}
def run(task, output, spec, hs=None, log=False):
    policy = DraftPolicy(make_proposer(task.prompt_ids, spec, classes), truth, True, trees=False, stop_ids=eos)
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
        c = truth.at(ctx).ratio(len(draft.tokens) + 1)
        if log:
            ctxname = d.chosen.context if d.chosen is not None else "-"
            print(f"  pos {pos:4d} {d.source or '-':10s} {ctxname:24s} k {len(draft.tokens):3d} hit {hits:3d} cost {c:5.2f} best {truth.at(ctx).ratio(hits + 1) if hits < len(draft.tokens) else c:5.2f}  {tok.decode(output[pos:pos+hits+1])!r:.60}  miss {tok.decode(draft.tokens[hits:hits+3])!r}")
        policy.record(d, emitted); policy.proposer.observe(emitted)
        cost += c; passes += 1; pos += len(emitted)
    return cost, passes
for t in res["tasks"]:
    task = tasks.get(t["name"])
    if task is None or not task.prediction_ids:
        continue
    output = tok.encode(t["runs"]["foretell"]["text"], add_special_tokens=False)
    row = []
    for label, spec in (("ngram", SpeculationParams(method="ngram")), ("pred", SpeculationParams(prediction=task.prediction_ids))):
        for hs in (None, "k"):
            c, p = run(task, output, spec, hs)
            row.append((c, p)); tot.setdefault((label, hs), []).append(c)
    print(f"{t['name']:26s} " + "  ".join(f"{c:7.1f} ({p})" for c, p in row) + f"  pred/ngram {row[0][0]/row[2][0]:.3f}", flush=True)
    if show and show in t["name"]:
        run(task, output, SpeculationParams(prediction=task.prediction_ids), None, True)
import math
for k, v in tot.items():
    print(k, f"{sum(v):.1f}")
g = [a / b for a, b in zip(tot[("ngram", None)], tot[("pred", None)])]
print("geomean ngram/pred", math.exp(sum(map(math.log, g)) / len(g)))
