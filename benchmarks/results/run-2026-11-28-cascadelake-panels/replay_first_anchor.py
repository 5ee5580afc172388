"""Replays the draft policy (no model) with the first anchor after a reply's preamble trusted at once (base) or
confirmed like any re-anchor; the real-edit outputs of four runs and the held-out-like requests on three curves
(Cascade Lake before and with panels, Sapphire Rapids), plus this round's outputs. Run from the repository root."""
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
PANELS = CostModel({2: 1.08, 3: 1.19, 4: 1.19, 8: 1.72, 16: 2.56, 17: 2.64, 32: 3.93, 33: 4.42, 48: 5.83, 49: 5.83, 64: 7.43, 65: 7.98, 96: 11.02, 97: 11.02, 128: 14.84, 129: 14.84, 256: 28.54})
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
    for g, curve in (("held-clx", CLX), ("held-spr", SPR), ("held-panels", PANELS)):
        items.append((g, name, ids, pred, out, curve))

today = json.load(open("benchmarks/results/run-2026-11-28-cascadelake-panels/res-ab-1795906866.json"))
for name, (instr, f, style) in held_tasks.items():
    if name not in today: continue
    ids = tok.apply_chat_template([{"role": "user", "content": held_prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
    out = list(tok.encode(today[name]["Anone"][0]["text"], add_special_tokens=False)) + [eos]
    pred = list(tok.encode(prediction_text(f, style), add_special_tokens=False))
    items.append(("today-panels", name, ids, pred, out, PANELS))
PROSE = {"explain_go", "review_css"}
from foretell.core.aligner import PredictionAligner as AL
orig = AL._reanchor
def first_confirmed(self, cursor, evidence):
    first = self._matched == 0
    orig(self, cursor, evidence)
    if first:
        self._confirm_left = self.config.confirm_tokens
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
for vname in ("base", "confirm-first"):
    AL._reanchor = first_confirmed if vname == "confirm-first" else orig
    by = collections.defaultdict(list); per = {}
    for g, name, prompt, pred, out, curve in items:
        c = {}
        for m in ("ngram", "auto"):
            spec = SpeculationParams(prediction=pred if m == "auto" else None, method=m)
            proposer = prediction.make_proposer(prompt, spec, classes)
            p = DraftPolicy(proposer, curve, priors=PRIORS, stop_ids={eos})
            c[m] = sim.simulate_policy(p, out).cost
        by[g].append(c["ngram"] / c["auto"]); per[(g, name)] = c["ngram"] / c["auto"]
    print(f"{vname:15s}", " ".join(f"{g}: {gm(v):.4f} (min {min(v):.3f})" for g, v in by.items()),
          f"| all {gm([x for v in by.values() for x in v]):.4f}", flush=True)
    print("   held-panels:", " ".join(f"{n}:{r:.3f}" for (g, n), r in per.items() if g in ("held-panels", "today-panels")), flush=True)
