"""Replay the policy on the held-out-like outputs (a probe.py res-*.json, e.g. heldout-base.json), ngram vs pred; variants m=P: the prior of prediction/moved."""
import json, sys, os, glob, math
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-spr-heldout"))
from foretell.core.adaptive_k import AttentionCost, CostModel
import foretell.core.policy as P
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.config import SpeculationParams
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
from foretell.core.simulate import simulate_policy
from tasks import tasks, prompt, prediction_text

cache = json.load(open(os.environ["COST_JSON"]))
curve = CostModel({int(k): v for k, v in cache["points"].items()}, AttentionCost(**cache["attention"]))
tok = load_tokenizer(resolve_model(None).path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
variants = sys.argv[2].split(",") if len(sys.argv) > 2 else ["base"]
data = json.load(open(sys.argv[1]))

class Counting(DraftPolicy):
    drafting_steps = 0
    def decide(self, *a, **k):
        d = super().decide(*a, **k)
        self.drafting_steps += bool(d.draft.tokens)
        return d

def run(prompt_ids, output, spec, variant):
    kw = dict(x.split("=") for x in variant.split("+") if "=" in x)
    policy = Counting(make_proposer(prompt_ids, spec, classes), curve, True, trees=False, stop_ids={eos},
                      priors={**P.PRIORS, **({"prediction/moved": (float(kw["m"]), 4.0)} if "m" in kw else {})})
    r = simulate_policy(policy, output, 128, kw.get("hs"), len(prompt_ids))
    return r.cost + float(os.environ.get("OVERHEAD", "0")) * policy.drafting_steps, r.passes

for v in variants:
    print("==", v)
    ratios = []
    for name, d in data.items():
        instr, f, style = tasks[name]
        ids = tok.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
        ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
        out = list(tok.encode(d["none"][0]["text"], add_special_tokens=False)) + [eos]
        pred = list(tok.encode(prediction_text(f, style), add_special_tokens=False))
        ng = run(ids, out, SpeculationParams(method="ngram"), v)
        pr = run(ids, out, SpeculationParams(prediction=pred), v)
        ratios.append(ng[0] / pr[0])
        print(f"  {name:16s} n {len(out):5d} ngram {ng[0]:7.1f} ({ng[1]:4d}) pred {pr[0]:7.1f} ({pr[1]:4d}) pred/ngram {ng[0]/pr[0]:.3f} ngram/plain {len(out)/ng[0]:.3f} pred/plain {len(out)/pr[0]:.3f}")
    print(f"  geomean pred/ngram {math.exp(np.mean(np.log(ratios))):.4f} min {min(ratios):.3f}")
