"""Replay (no model) the draft policy with a margin on a draft's net gain (a draft only where it beats plain decoding by
MARGIN tokens): real-edit outputs of five runs, the 14 held-out-like outputs and the open prompt's reply, each on cost
curves. Prints per group: geomean of n-gram-alone cost / prediction cost, and each arm's cost over plain decoding's.
    python replay_margin.py 0,0.03,0.06,0.1        (run from the repository root)
With margin 0 it is the policy as it is; split_first_token.diff (applied to src/foretell/core/adaptive_k.py) gave the
SPLIT rows of NOTES.md with margin 0."""
import json, math, sys, collections, glob, os
from foretell.core.adaptive_k import CostModel, AcceptanceTracker
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions, OPEN_PROMPT, GARBAGE_TEXT, chat_prompt_ids
import foretell.core.prediction as prediction
import foretell.core.simulate as sim
from foretell.core.policy import DraftPolicy
from foretell.config import SpeculationParams
HELD = "benchmarks/results/run-2026-11-28-spr-heldout"
sys.path.insert(0, HELD)
from tasks import tasks as held_tasks, prompt as held_prompt, prediction_text
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
curve_of = lambda res: CostModel({int(k): float(v) for k, v in res['meta']['cost_curve'].items() if int(k) > 1})
FILES = {"spr05": "benchmarks/results/run-2026-11-26-spr/results.json",
         "spr15": "benchmarks/results/realedit-1.5b-2026-11-26-spr/results.json",
         "epyc05": "benchmarks/results/run-2026-11-26-epyc-lean/results.json",
         "epyc15": "benchmarks/results/realedit-1.5b-2026-11-26-epyc-lean/results.json",
         "zen3-now": "benchmarks/results/run-2026-11-30-epyc-vllm-cpu/realedit/results.json"}
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
items = []
for g, path in FILES.items():
    res = json.load(open(path))
    curve = curve_of(res)
    for r in res['tasks']:
        if r['suite'] != 'realedit': continue
        t = tasks[r['name']]
        out = list(tok.encode(r['runs']['plain']['text'], add_special_tokens=False)) + [eos]
        items.append((g, r['name'], list(t.prompt_ids), list(t.prediction_ids), out, curve))
CLX = CostModel({2: 1.1101, 3: 1.3611, 4: 1.3611, 8: 2.056, 16: 2.8289, 17: 3.0703, 32: 4.7161, 33: 5.4117, 48: 6.8595,
                 49: 7.1433, 64: 9.0862, 65: 9.3125, 96: 13.5842, 97: 14.2171, 128: 18.7484})
SPR = curve_of(json.load(open("benchmarks/results/run-2026-11-28-spr-stairs/bench/results.json")))
ZEN3 = curve_of(json.load(open("benchmarks/results/run-2026-11-30-epyc-vllm-cpu/realedit/results.json")))
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
    for g, curve in (("held-clx", CLX), ("held-spr", SPR), ("held-zen3", ZEN3)):
        items.append((g, name, ids, pred, out, curve))
open_out = list(tok.encode(json.load(open("benchmarks/results/run-2026-11-30-epyc-vllm-cpu/open_text.json"))["open"], add_special_tokens=False)) + [eos]
open_prompt = chat_prompt_ids(tok, OPEN_PROMPT)
garbage = list(tok.encode((GARBAGE_TEXT * 20)[:1200], add_special_tokens=False))
for g, curve in (("open-clx", CLX), ("open-spr", SPR), ("open-zen3", ZEN3)):
    items.append((g, "open", open_prompt, garbage, open_out, curve))
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
import numpy as np
import foretell.core.policy as pol
import foretell.core.adaptive_k as ak
orig = ak.choose_k
def margin_choose(margin):
    def choose(tracker, cost, k_max, available, cap=None, batch_tokens=0, batch_expected=0.0, rate=None):
        limit = min(k_max, available, k_max if cap is None else cap)
        if limit <= 0: return 0
        expected = tracker.expected_tokens(limit)
        r = ak.pass_rate(expected, cost, batch_tokens, batch_expected) if rate is None else rate
        net = ak.net_gain(expected, cost, r, batch_tokens)
        best = int(np.argmax(net))
        if best > 0 and net[best] < margin: best = 0
        return best if best > 0 or batch_tokens > 0 else tracker.probe_size(cost, limit)
    return choose
for split in [float(x) for x in (sys.argv[1].split(",") if len(sys.argv) > 1 else ["0", "0.05", "0.1"])]:
    pol.choose_k = margin_choose(split)
    by, vs_plain = collections.defaultdict(list), collections.defaultdict(lambda: collections.defaultdict(list))
    detail = []
    for g, name, prompt, pred, out, curve in items:
        c = {}
        for m in ("ngram", "auto"):
            spec = SpeculationParams(prediction=pred if m == "auto" else None, method=m)
            p = DraftPolicy(prediction.make_proposer(prompt, spec, classes), curve, stop_ids={eos})
            c[m] = sim.simulate_policy(p, out, context=len(prompt)).cost
        plain = sum(curve.at(len(prompt) + i).ratio(1) for i in range(len(out))) if hasattr(curve, "at") else len(out)
        by[g].append(c["ngram"] / c["auto"])
        vs_plain[g]["ngram"].append(plain / c["ngram"]); vs_plain[g]["auto"].append(plain / c["auto"])
        detail.append(f"{g}:{name} {c['ngram'] / c['auto']:.3f}")
    print(f"margin {split}", " | ".join(f"{g}: {gm(v):.4f} (min {min(v):.3f}) ng/plain {gm(vs_plain[g]['ngram']):.3f} auto/plain {gm(vs_plain[g]['auto']):.3f}" for g, v in by.items()), flush=True)
    print("   all", f"{gm([x for v in by.values() for x in v]):.4f}")
    if len(sys.argv) > 2: print("  ", " ".join(detail))
