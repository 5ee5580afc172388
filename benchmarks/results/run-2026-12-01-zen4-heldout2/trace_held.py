"""Trace the policy (no model) on a held-out reply: python trace_held.py RES.json TASK [curve results.json]"""
import json, sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tasks import tasks, prompt, prediction_text
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.prediction import make_proposer
from foretell.core.policy import DraftPolicy, common_prefix
from foretell.config import SpeculationParams
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
res = json.load(open(sys.argv[1])); name = sys.argv[2]
curve = json.load(open(sys.argv[3] if len(sys.argv) > 3 else "/work/main/benchmarks/results/run-2026-11-30-zen4-int8/realedit-repeat3/results.json"))["meta"]["cost_curve"]
cost = CostModel({int(k): float(v) for k, v in curve.items() if int(k) > 1})
instr, f, style = tasks[name]
ids = tok.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
output = list(tok.encode(res[name]["none"][0]["text"], add_special_tokens=False)) + [eos]
pred = list(tok.encode(prediction_text(f, style), add_special_tokens=False))
verbose = os.environ.get("V")
for label, spec in (("ngram", SpeculationParams(prediction=None, method="ngram")), ("foretell", SpeculationParams(prediction=tuple(pred)))):
    pol = DraftPolicy(make_proposer(ids, spec, classes), cost, True, trees=True, stop_ids=frozenset({eos}))
    pos = 0; total = 0.0; passes = 0; waste = 0.0
    if verbose: print("==", label)
    while pos < len(output):
        room = min(128, len(output) - pos - 1)
        d = pol.decide(room, context=len(ids) + pos)
        m = common_prefix(d.draft.tokens, output[pos:])
        if d.branch is not None:
            m = max(m, common_prefix(d.branch.tokens, output[pos:]))
        emitted = output[pos:pos + m + 1]
        if verbose and (d.draft.tokens):
            opts = " ".join(f"{o.context}:k{o.k}/a{o.alpha:.2f}" for o in d.options)
            print(f"  at {pos:4d} {d.draft.source:11s} k {len(d.draft):3d}{'+b' if d.branch else '  '} acc {m:3d} cost {d.cost:5.2f} | {opts} | next {tok.decode(output[pos+m:pos+m+1])!r}")
        pol.record(d, emitted); pol.proposer.observe(emitted); pos += len(emitted); total += d.cost; passes += 1
    print(f"{label:9s} passes {passes:4d} cost {total:7.1f}")
