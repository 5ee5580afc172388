"""Trace the draft policy (no model) on one held-out-like request's recorded greedy output, this session's Sapphire
Rapids cost curve (run-2026-12-01-spr-recheck/bench). usage: trace_held.py TASK|all [res.json] (VERBOSE=1: every
pass; all: each task's n-gram cost over the prediction's, and their geomean)"""
import math
import sys, os, json, importlib.util
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.config import SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.core.policy import DraftPolicy, common_prefix
from foretell.core.prediction import make_proposer
R = "benchmarks/results/"
def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(os.path.dirname(path)) + "_tasks", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
sets = [load(R + "run-2026-11-28-spr-heldout/tasks.py"), load(R + "run-2026-12-01-zen4-heldout2/tasks.py")]
tok = load_tokenizer(resolve_model("default").path)
res = json.load(open(sys.argv[2] if len(sys.argv) > 2 else R + "run-2026-12-01-spr-recheck/heldout/res-foretell.json"))
bench = json.load(open(R + "run-2026-12-01-spr-recheck/bench/results.json"))
cost = CostModel({int(k): float(v) for k, v in bench["meta"]["cost_curve"].items() if int(k) > 1})
classes = TokenClasses.from_tokenizer(tok)
eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}


def trace(name):
    mod = [m for m in sets if name in m.tasks][0]
    instr, f, style = mod.tasks[name]
    ids = tok.apply_chat_template([{"role": "user", "content": mod.prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
    pred = tok.encode(sets[0].prediction_text(f, style), add_special_tokens=False)
    output = tok.encode(res[name]["none"][0]["text"], add_special_tokens=False) + [min(eos)]
    totals = {}
    for label, spec in (("ngram", SpeculationParams(prediction=None, method="ngram")), ("pred", SpeculationParams(prediction=tuple(pred)))):
        pol = DraftPolicy(make_proposer(ids, spec, classes), cost, True, trees=False, stop_ids=frozenset(eos))
        pos = 0; total = 0.0; passes = 0
        while pos < len(output):
            room = min(128, len(output) - pos - 1)
            d = pol.decide(room, context=len(ids) + pos)
            m = common_prefix(d.draft.tokens, output[pos:])
            emitted = output[pos:pos + m + 1]
            if d.draft.tokens and os.environ.get("VERBOSE"):
                print(f"{label} at {pos:4d} {d.draft.source:10s} {d.chosen.context:22s} k {len(d.draft):3d} acc {m:3d} cost {d.cost:5.2f} next {tok.decode(output[pos+m:pos+m+1])!r} draft {tok.decode(d.draft.tokens[m:m+3])!r}")
            pol.record(d, emitted); pol.proposer.observe(emitted); pos += len(emitted); total += d.cost; passes += 1
        totals[label] = (passes, total)
    return totals


names = [n for m in sets for n in m.tasks if n in res] if sys.argv[1] == "all" else [sys.argv[1]]
ratios = []
for name in names:
    t = trace(name)
    ratios.append(t["ngram"][1] / t["pred"][1])
    print(f"{name:16s} ngram {t['ngram'][0]:4d} passes {t['ngram'][1]:7.1f} | pred {t['pred'][0]:4d} passes {t['pred'][1]:7.1f} | {ratios[-1]:.3f}x")
if len(ratios) > 1:
    print(f"geomean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f}, min {min(ratios):.3f}")
