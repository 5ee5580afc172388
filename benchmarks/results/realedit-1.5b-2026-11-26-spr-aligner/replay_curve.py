"""Replays the round before's 1.5B real-edit outputs (Sapphire Rapids) deciding with three cost curves (the run's
final, raised one; the start-up one; the one re-measured with sizes interleaved, min of 10 rounds) and prices every
pass with the re-measured one. Run from the repository root."""
import json, math, sys
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions
import foretell.core.prediction as prediction
import foretell.core.simulate as sim
from foretell.core.policy import DraftPolicy
from foretell.config import SpeculationParams
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
res = json.load(open("benchmarks/results/realedit-1.5b-2026-11-26-spr/results.json"))
refined = CostModel({int(k): float(v) for k, v in res['meta']['cost_curve'].items() if int(k) > 1})
startup = CostModel({2: 1.11, 3: 1.21, 4: 1.3, 8: 1.61, 16: 1.63, 32: 1.9, 64: 2.41, 128: 3.17, 256: 5.15})
true = CostModel({2: 1.17, 3: 1.2, 4: 1.31, 5: 1.45, 6: 1.5, 8: 1.5, 12: 1.52, 16: 1.55, 20: 1.69, 24: 1.81, 32: 1.9, 48: 2.01, 64: 2.38, 128: 3.17})
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
def run(policy, out, account):
    pos = 0; cost = 0.0
    while pos < len(out):
        d = policy.decide(min(128, len(out) - pos - 1))
        nodes, _, _ = d.tree()
        hits = 0
        for dr in (d.draft, d.branch):
            if dr is not None and dr.tokens: hits = max(hits, sim._common_prefix(dr.tokens, out, pos))
        em = out[pos:pos+hits+1]; policy.record(d, em); policy.proposer.observe(em)
        cost += account.ratio(len(nodes) + 1); pos += len(em)
    return cost
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
for dname, decide in (("refined", refined), ("startup", startup), ("true", true)):
    rs = []; tot = {}
    for r in res['tasks']:
        if r['suite'] != 'realedit': continue
        t = tasks[r['name']]
        out = list(tok.encode(r['runs']['plain']['text'], add_special_tokens=False)) + [eos]
        c = {}
        for m in ("ngram", "auto"):
            p = DraftPolicy(prediction.make_proposer(list(t.prompt_ids), SpeculationParams(prediction=list(t.prediction_ids) if m == "auto" else None, method=m), classes), decide, stop_ids={eos})
            c[m] = run(p, out, true)
        rs.append(c["ngram"] / c["auto"]); tot[r['name'][9:]] = (round(c["ngram"], 1), round(c["auto"], 1), len(out))
    print(dname, f"n-gram cost / prediction cost, geomean {gm(rs):.4f}", "per task (n-gram cost, prediction cost, tokens):", tot)
