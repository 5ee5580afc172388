"""Replay the draft policy (no model), TREES=0 (exact mode: chains) or TREES=1 (token trees): a context of its own for the aligner's weak re-anchors before the output has
ever lined up with the prediction ("prediction/opening": a reply that opened with other text, prose or a preamble),
at several priors, against today's policy. Items: the real-edit outputs of four runs (0.5B/1.5B, SPR/EPYC, own curves)
and the held-out-like requests' greedy outputs (the 14, the 8 of heldout2, the 8 of heldout3) on two curves.
Prints per variant the simulated cost of n-gram lookup alone over that with the prediction (geomean, min) per group and
the prose replies. Run from the repository root."""
import json, math, sys, collections, glob, os, importlib.util
from foretell.core.adaptive_k import CostModel
import foretell.core.aligner as A
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions
import foretell.core.prediction as prediction
import foretell.core.simulate as sim
from foretell.core.policy import DraftPolicy, PRIORS
from foretell.config import SpeculationParams
R = "benchmarks/results/"
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
enc = lambda s: list(tok.encode(s, add_special_tokens=False))
def chat(msgs):
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
FILES = {"spr05": R + "run-2026-11-26-spr/results.json", "spr15": R + "realedit-1.5b-2026-11-26-spr/results.json",
         "epyc05": R + "run-2026-11-26-epyc-lean/results.json", "epyc15": R + "realedit-1.5b-2026-11-26-epyc-lean/results.json"}
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
items = []
for g, path in FILES.items():
    res = json.load(open(path))
    curve = CostModel({int(k): float(v) for k, v in res['meta']['cost_curve'].items() if int(k) > 1})
    for r in res['tasks']:
        if r['suite'] != 'realedit': continue
        t = tasks[r['name']]
        items.append((g, r['name'], list(t.prompt_ids), list(t.prediction_ids), enc(r['runs']['plain']['text']) + [eos], curve))
CLX = CostModel({2: 1.1101, 3: 1.3611, 4: 1.3611, 8: 2.056, 16: 2.8289, 17: 3.0703, 32: 4.7161, 33: 5.4117, 48: 6.8595,
                 49: 7.1433, 64: 9.0862, 65: 9.3125, 96: 13.5842, 97: 14.2171, 128: 18.7484})
SPR = CostModel({int(n): float(r) for n, r in json.load(open(R + "run-2026-12-01-spr-int8/bf16/results.json"))["meta"]["cost_curve"].items() if int(n) > 1})
held = []  # (name, prompt ids, prediction ids, output ids)
def texts_of(pattern):
    out = {}
    for f in sorted(glob.glob(pattern)):
        for name, v in json.load(open(f)).items():
            if isinstance(v, dict) and v.get("none") and v["none"][0].get("text") and name not in out:
                out[name] = v["none"][0]["text"]
    return out
for d, pat in ((R + "run-2026-11-28-spr-heldout", "res-*.json"), (R + "run-2026-12-01-zen4-heldout2", "res-foretell.json")):
    m = load(d + "/tasks.py", os.path.basename(d)); texts = texts_of(os.path.join(d, pat))
    for name, (instr, f, style) in m.tasks.items():
        if name in texts:
            held.append((name, chat([{"role": "user", "content": m.prompt(instr, f, style)}]), enc(m.prediction_text(f, style)), enc(texts[name]) + [eos]))
d3 = R + "run-2026-12-02-spr-heldout3"; m3 = load(d3 + "/tasks.py", "h3"); t3 = texts_of(d3 + "/res-foretell.json")
for name, (msgs, pred) in m3.tasks.items():
    if isinstance(pred, list): pred = "".join(p["text"] for p in pred)
    held.append((name, chat(msgs), enc(pred), enc(t3[name]) + [eos]))

_e = json.load(open(d3 + "/engine_cost.json"))  # this session's engine (SPR, bf16): its curve and attention per key
from foretell.core.adaptive_k import AttentionCost
ENG = CostModel({int(k): v for k, v in _e["points"].items()}, AttentionCost(**_e["attention"]))
for name, p, q, o in held:
    for g, curve in (("held-clx", CLX), ("held-spr", SPR), ("held-eng", ENG)):
        items.append((g, name, p, q, o, curve))
PROSE = {"explain_go", "review_css", "tests_py", "graph_explain", "sh_question"}
base_context = A.PredictionAligner.context
def opening_context(self):
    c = base_context(self)
    return "prediction/opening" if c == "prediction/tentative" and self._matched == 0 else c
TREES = os.environ.get("TREES", "1") == "1"
VARIANTS = {"today": None, "open .45": (0.45, 4.0), "open .3": (0.3, 4.0), "open .2": (0.2, 4.0), "open .1": (0.1, 4.0)}
only = sys.argv[1].split(",") if len(sys.argv) > 1 else None
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
for vname, prior in VARIANTS.items():
    if only and vname not in only: continue
    A.PredictionAligner.context = base_context if prior is None else opening_context
    priors = PRIORS if prior is None else {**PRIORS, "prediction/opening": prior}
    by, prose = collections.defaultdict(list), []
    for g, name, prompt, pred, out, curve in items:
        c = {}
        for meth in ("ngram", "auto"):
            spec = SpeculationParams(prediction=pred if meth == "auto" else None, method=meth)
            p = DraftPolicy(prediction.make_proposer(prompt, spec, classes), curve, priors=priors, stop_ids={eos}, trees=TREES)
            c[meth] = sim.simulate_policy(p, out, context=len(prompt)).cost if "context" in sim.simulate_policy.__code__.co_varnames else sim.simulate_policy(p, out).cost
        by[g].append(c["ngram"] / c["auto"])
        if name in PROSE: prose.append(f"{g[5:]}:{name} {c['ngram'] / c['auto']:.3f}")
    print(f"{vname:9s}", " ".join(f"{g}: {gm(v):.4f} (min {min(v):.3f})" for g, v in by.items()),
          f"| all {gm([x for v in by.values() for x in v]):.4f} |", " ".join(prose), flush=True)
