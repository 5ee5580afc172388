"""Replays the draft policy (no model) on a held-out task's greedy output, with the prediction (pred) or without (ngram),
on the staircase cost curve of run-2026-11-28-spr-stairs: python replay.py TASK pred|ngram [-v]  (-v: every step)."""
import json, sys, glob
from foretell.config import SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.core.simulate import simulate_policy
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
sys.argv += [""] * 3
import os; HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE)
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
res = json.load(open("benchmarks/results/run-2026-11-28-spr-stairs/bench/results.json"))
curve = CostModel({int(n): float(r) for n, r in res["meta"]["cost_curve"].items() if int(n) > 1})
name, label, verbose = sys.argv[1], sys.argv[2] or "pred", sys.argv[3] == "-v"
from tasks import tasks, prompt, prediction_text
ns = {"tasks": tasks, "prompt": prompt}
instr, f, style = ns["tasks"][name]
msgs = [{"role": "user", "content": ns["prompt"](instr, f, style)}]
prompt_ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
prompt_ids = list(prompt_ids["input_ids"]) if hasattr(prompt_ids, "keys") else list(prompt_ids)
data = next(d for d in (json.load(open(f)) for f in sorted(glob.glob(os.path.join(HERE, "res-*.json")))[::-1])
            if name in d and d[name]["none"][0].get("tok"))  # newest greedy run of the task
text = data[name]["none"][0]["text"]
out = list(tok.encode(text, add_special_tokens=False)) + [eos]
pred = list(tok.encode(prediction_text(f, style), add_special_tokens=False))
spec = SpeculationParams(prediction=pred) if label == "pred" else SpeculationParams()
p = DraftPolicy(make_proposer(prompt_ids, spec, classes), curve, stop_ids={eos}, trees=False)
pos = [0]; orig = p.record
def rec(decision, emitted):
    d = decision.draft; k = len(d) if d is not None else 0; acc = len(emitted) - 1
    line = f"{pos[0]:5d} {d.source if d else '-':12s} k={k:3d} acc={acc:3d} cost={decision.cost:.2f} ctx={decision.chosen.context if decision.chosen else ''} a={decision.chosen.alpha if decision.chosen else 0:.2f}"
    if acc < k: line += f" | draft {tok.decode(d.tokens[acc:acc+6])!r} out {tok.decode(out[pos[0]+acc:pos[0]+acc+6])!r}"
    if verbose: print(line)
    pos[0] += len(emitted); return orig(decision, emitted)
p.record = rec
s = simulate_policy(p, out, 128)
print(name, label, "passes", s.passes, "cost", round(s.cost, 1), "tokens", len(out), "sources", s.sources)
