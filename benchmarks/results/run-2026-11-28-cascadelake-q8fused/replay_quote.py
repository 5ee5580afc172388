"""Replays the draft policy (no model) with the aligner's quote context on and off: the real-edit outputs of four
runs (0.5B and 1.5B, Sapphire Rapids and EPYC, each on its own cost curve) and the 14 held-out-like requests'
greedy outputs (run-2026-11-28-spr-heldout, on two curves: Cascade Lake's fp32 int8 one and Sapphire Rapids'
staircase). Prints, per variant, the simulated cost of n-gram lookup alone over that with the prediction
(geomean, min, per group) and the prose replies' ratios. Run from the repository root."""
import json, math, sys, collections, glob, os
from foretell.core.adaptive_k import CostModel
import functools
import foretell.core.aligner as aligner_module
from foretell.core.aligner import AlignerConfig
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions
import foretell.core.prediction as prediction
import foretell.core.simulate as sim
from foretell.core.policy import DraftPolicy, PRIORS
from foretell.config import SpeculationParams
HELD = "benchmarks/results/run-2026-11-28-spr-heldout"
sys.path.insert(0, HELD)
from tasks import tasks as held_tasks, prompt as held_prompt, prediction_text
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
FILES = {"spr05": "benchmarks/results/run-2026-11-26-spr/results.json",
         "spr15": "benchmarks/results/realedit-1.5b-2026-11-26-spr/results.json",
         "epyc05": "benchmarks/results/run-2026-11-26-epyc-lean/results.json",
         "epyc15": "benchmarks/results/realedit-1.5b-2026-11-26-epyc-lean/results.json"}
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
items = []
for g, path in FILES.items():
    res = json.load(open(path))
    curve = CostModel({int(k): float(v) for k, v in res['meta']['cost_curve'].items() if int(k) > 1})
    for r in res['tasks']:
        if r['suite'] != 'realedit': continue
        t = tasks[r['name']]
        out = list(tok.encode(r['runs']['plain']['text'], add_special_tokens=False)) + [eos]
        items.append((g, r['name'], list(t.prompt_ids), list(t.prediction_ids), out, curve))
CLX = CostModel({2: 1.1101, 3: 1.3611, 4: 1.3611, 8: 2.056, 16: 2.8289, 17: 3.0703, 32: 4.7161, 33: 5.4117, 48: 6.8595,
                 49: 7.1433, 64: 9.0862, 65: 9.3125, 96: 13.5842, 97: 14.2171, 128: 18.7484})  # Cascade Lake, fp32, this round
stairs = json.load(open("benchmarks/results/run-2026-11-28-spr-stairs/bench/results.json"))
SPR = CostModel({int(n): float(r) for n, r in stairs["meta"]["cost_curve"].items() if int(n) > 1})
texts = {}
for f in sorted(glob.glob(os.path.join(HELD, "res-*.json"))):
    d = json.load(open(f))
    for name, v in d.items():
        if isinstance(v, dict) and v.get("none") and v["none"][0].get("text"):
            texts[name] = v["none"][0]["text"]
for name, (instr, f, style) in held_tasks.items():
    if name not in texts: continue
    ids = tok.apply_chat_template([{"role": "user", "content": held_prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
    out = list(tok.encode(texts[name], add_special_tokens=False)) + [eos]
    pred = list(tok.encode(prediction_text(f, style), add_special_tokens=False))
    for g, curve in (("held-clx", CLX), ("held-spr", SPR)):
        items.append((g, name, ids, pred, out, curve))
PROSE = {"explain_go", "review_css"}
VARIANTS = {
    "off": ({"quote_share": 0.0}, {}),
    "on .5/32 p.5": ({}, {}),
    "on .3/32 p.5": ({"quote_share": 0.3}, {}),
    "on .5/64 p.5": ({"quote_after": 64}, {}),
    "on .5/32 p.35": ({}, {"prediction/quote": (0.35, 4.0)}),
    "on .5/32 p.65": ({}, {"prediction/quote": (0.65, 4.0)}),
    "on .2/32 p.5": ({"quote_share": 0.2}, {}),
    "on .25/32 p.5": ({"quote_share": 0.25}, {}),
    "on .3/32 p.35": ({"quote_share": 0.3}, {"prediction/quote": (0.35, 4.0)}),
    "on .3/16 p.5": ({"quote_share": 0.3, "quote_after": 16}, {}),
    "on .3/48 p.5": ({"quote_share": 0.3, "quote_after": 48}, {}),
    "on .4/32 p.5": ({"quote_share": 0.4}, {}),
}
only = sys.argv[1].split(",") if len(sys.argv) > 1 else None
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
for vname, (aconf, over) in VARIANTS.items():
    if only and vname not in only: continue
    priors = {**PRIORS, **over}
    aligner_module.AlignerConfig = functools.partial(AlignerConfig, **aconf)  # the aligner's defaults for this variant
    by, prose = collections.defaultdict(list), []
    for g, name, prompt, pred, out, curve in items:
        c = {}
        for m in ("ngram", "auto"):
            spec = SpeculationParams(prediction=pred if m == "auto" else None, method=m)
            proposer = prediction.make_proposer(prompt, spec, classes)
            p = DraftPolicy(proposer, curve, priors=priors, stop_ids={eos})
            c[m] = sim.simulate_policy(p, out).cost
        by[g].append(c["ngram"] / c["auto"])
        if name in PROSE: prose.append(f"{g}:{name} {c['ngram'] / c['auto']:.3f}")
    print(f"{vname:15s}", " ".join(f"{g}: {gm(v):.4f} (min {min(v):.3f})" for g, v in by.items()),
          f"| all {gm([x for v in by.values() for x in v]):.4f} |", " ".join(prose), flush=True)
