"""Replay the policy on recorded outputs with and without estimates kept apart per run length (apply streaks.patch first:
git apply benchmarks/results/run-2026-11-29-cascadelake-registers/streaks.patch at the repository root; not kept); cost on the context-aware curve.
    COST_JSON=../run-2026-11-29-cascadelake-context/cost-curve-0.5b.json python replay_streak.py "none:16,64,256:32,128" results.json ..."""
import json, sys, os, collections
from foretell.core.adaptive_k import AttentionCost, CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.config import SpeculationParams
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
cache = json.load(open(os.environ["COST_JSON"]))
truth = CostModel({int(k): v for k, v in cache["points"].items()}, AttentionCost(**cache["attention"]))
tok = load_tokenizer(resolve_model(None).path)
tasks = {t.name: t for t in build_tasks(tok, ["realedit", "longfile", "controls", "edit"], WorkloadOptions())[0]}
classes = TokenClasses.from_tokenizer(tok); eos = {tok.eos_token_id}
variants = {k: tuple(int(x) for x in k.split(",")) if k != "none" else () for k in sys.argv[1].split(":")}
tot = collections.defaultdict(float); seen = set()
for f in sys.argv[2:]:
    for t in json.load(open(f))["tasks"]:
        task = tasks.get(t["name"])
        if task is None or not task.prediction_ids: continue
        text = t["runs"]["foretell"]["text"]
        if (t["name"], text) in seen: continue
        seen.add((t["name"], text))
        output = tok.encode(text, add_special_tokens=False)
        row = []
        for label, spec in (("ngram", SpeculationParams(method="ngram")), ("pred", SpeculationParams(prediction=task.prediction_ids))):
            for vname, streaks in variants.items():
                policy = DraftPolicy(make_proposer(task.prompt_ids, spec, classes), truth, True, trees=False, stop_ids=eos, streaks=streaks)
                pos, cost, passes = 0, 0.0, 0
                while pos < len(output):
                    ctx = len(task.prompt_ids) + pos
                    room = min(128, len(output) - pos - 1)
                    d = policy.decide(room, context=ctx)
                    hits = 0
                    while hits < len(d.draft.tokens) and pos + hits < len(output) and d.draft.tokens[hits] == output[pos + hits]: hits += 1
                    emitted = output[pos:pos + hits + 1]
                    policy.record(d, emitted); policy.proposer.observe(emitted)
                    cost += truth.at(ctx).ratio(len(d.draft.tokens) + 1); passes += 1; pos += len(emitted)
                row.append(f"{label}/{vname} {cost:7.1f}({passes})")
                tot[(label, vname)] += cost
        print(f"{t['name']:32s} out {len(output):5d} " + " ".join(row), flush=True)
for k, v in sorted(tot.items()): print(k, f"{v:.1f}")
