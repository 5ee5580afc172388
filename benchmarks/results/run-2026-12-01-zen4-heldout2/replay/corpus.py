"""Replay the draft policy (no model) on recorded outputs: n-gram lookup alone against the prediction, the cost
summed on each run's cost curve. Run from the repository root:
    VARIANT=soft+wordheads+nosub+b2 python benchmarks/results/run-2026-12-01-zen4-heldout2/replay/corpus.py
VARIANT names the prototypes of variants.py (joined by +; empty = the policy as it is). Prints per group the geomean
of n-gram cost / prediction cost and writes the rows to /tmp/rows-VARIANT.json (cmp.py A B compares two)."""
import json, math, sys, collections, glob, os
sys.path.insert(0, os.path.dirname(__file__))
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions, OPEN_PROMPT, GARBAGE_TEXT, chat_prompt_ids
from foretell.core.prediction import make_proposer
from foretell.core.simulate import simulate_policy
from foretell.core.policy import DraftPolicy
from foretell.config import SpeculationParams
import variants
variants.apply(os.environ.get("VARIANT", ""))
HELD = "benchmarks/results/run-2026-11-28-spr-heldout"
sys.path.insert(0, HELD)
from tasks import tasks as held_tasks, prompt as held_prompt, prediction_text
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
eos2 = tok.convert_tokens_to_ids("<|endoftext|>")
curve_of = lambda res: CostModel({int(k): float(v) for k, v in res['meta']['cost_curve'].items() if int(k) > 1})
R = "benchmarks/results/"
FILES = {"z4-05": R + "run-2026-11-30-zen4-int8/realedit-int8-asked/results.json",
         "z4-05r": R + "run-2026-11-30-zen4-int8/realedit-repeat3/results.json",
         "z4-15a": R + "run-2026-11-30-zen4-int8/realedit-1.5b-auto/results.json",
         "z4-15b": R + "run-2026-11-30-zen4-int8/realedit-1.5b-auto-run2/results.json",
         "z4-15bf": R + "run-2026-11-30-zen4-int8/realedit-1.5b-bf16/results.json",
         "z4-05bf": R + "run-2026-11-30-zen4-int8/realedit-bf16/results.json",
         "spr05": R + "run-2026-11-26-spr/results.json",
         "spr15": R + "realedit-1.5b-2026-11-26-spr/results.json",
         "epyc15": R + "realedit-1.5b-2026-11-26-epyc-lean/results.json",
         "zen3": R + "run-2026-11-30-epyc-vllm-cpu/realedit/results.json",
         "z4-15r": R + "run-2026-12-01-zen4-heldout2/realedit-1.5b-repeat3/results.json"}
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
items = []
for g, path in FILES.items():
    res = json.load(open(path))
    curve = curve_of(res)
    for r in res['tasks']:
        if r['suite'] != 'realedit': continue
        t = tasks[r['name']]
        run = r['runs'].get('foretell') or r['runs']['plain']
        out = list(tok.encode(run['text'], add_special_tokens=False)) + [eos]
        items.append((g, r['name'].split('/')[-1], list(t.prompt_ids), list(t.prediction_ids), out, curve))
Z4 = curve_of(json.load(open(FILES["z4-05"])))
Z415 = curve_of(json.load(open(FILES["z4-15a"])))
SPR = curve_of(json.load(open(R + "run-2026-11-28-spr-stairs/bench/results.json")))
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
    for g, curve in (("held-z4", Z4), ("held-z415", Z415), ("held-spr", SPR)):
        items.append((g, name, ids, pred, out, curve))
open_out = list(tok.encode(json.load(open(R + "run-2026-11-30-epyc-vllm-cpu/open_text.json"))["open"], add_special_tokens=False)) + [eos]
open_prompt = chat_prompt_ids(tok, OPEN_PROMPT)
garbage = list(tok.encode((GARBAGE_TEXT * 20)[:1200], add_special_tokens=False))
for g, curve in (("open-z4", Z4), ("open-spr", SPR)):
    items.append((g, "open", open_prompt, garbage, open_out, curve))
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
by = collections.defaultdict(list)
rows = []
stop = frozenset({eos, eos2})
for g, name, prompt, pred, out, curve in items:
    def replay(spec):
        pol = DraftPolicy(make_proposer(prompt, spec, classes), curve, True, trees=False, stop_ids=stop)
        return simulate_policy(pol, out, 128, None, context=len(prompt))
    n = replay(SpeculationParams(prediction=None, method="ngram"))
    f = replay(SpeculationParams(prediction=tuple(pred)))
    by[g.split("-")[0] if g.startswith(("held", "open")) else "realedit"].append(n.cost / f.cost)
    by["all"].append(n.cost / f.cost)
    rows.append((g, name, n.cost, f.cost, n.cost / f.cost, n.passes, f.passes))
grp = collections.defaultdict(list)
for r in rows: grp[r[0]].append(r[4])
print(" ".join(f"{g}:{gm(v):.3f}" for g, v in grp.items()))
if os.environ.get("ROWS"):
    for r in rows: print(f"{r[0]:10s} {r[1]:16s} ngram {r[2]:7.1f} pred {r[3]:7.1f} ratio {r[4]:.3f} passes {r[5]}/{r[6]}")
for k, v in by.items():
    print(f"{k:9s} n={len(v):3d} geomean {gm(v):.4f} min {min(v):.3f}")
json.dump(rows, open(f"/tmp/rows-{os.environ.get('VARIANT','base') or 'base'}.json", "w"))
