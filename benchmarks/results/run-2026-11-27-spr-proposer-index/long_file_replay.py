# Replays the saved reply (/tmp/long51.json, from long_file_save.py) step by step with the draft policy, no model; see NOTES.md.
import json, sys
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
import foretell.core.prediction as prediction
from foretell.core.policy import DraftPolicy
from foretell.core.adaptive_k import CostModel
from foretell.config import SpeculationParams
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
d = json.load(open("/tmp/long51.json"))
prompt = tok.apply_chat_template(d["msgs"], add_generation_prompt=True, tokenize=True)
prompt = list(prompt["input_ids"]) if not isinstance(prompt, list) else prompt
pred = tok.encode(d["code"], add_special_tokens=False)
out = tok.encode(d["out"], add_special_tokens=False) + [eos]
curve = CostModel({2: 1.0, 4: 1.02, 8: 1.08, 16: 1.21, 32: 1.54, 64: 2.70, 128: 3.96, 256: 8.23})
for method in ("auto", "ngram"):
    spec = SpeculationParams(prediction=tuple(pred) if method != "ngram" else None, method=method)
    p = DraftPolicy(prediction.make_proposer(prompt, spec, classes), curve, stop_ids={eos}, trees=False)
    pos = steps = 0; cost = 0.0; line = []
    while pos < len(out):
        room = min(128, len(out) - pos - 1)
        dd = p.decide(room)
        w = dd.draft.tokens; m = 0
        while m < len(w) and out[pos + m] == w[m]: m += 1
        ctx = (dd.chosen.context if dd.chosen is not None and w else "-")
        line.append(f"{ctx.split('/')[-1][:6]}:{len(w)}/{m}")
        emitted = out[pos:pos + m + 1]
        p.record(dd, emitted); p.proposer.observe(emitted)
        cost += curve.ratio(len(w) + 1)
        pos += len(emitted); steps += 1
    print(f"{method}: steps {steps} cost {cost:.1f}")
    print("  " + " ".join(line))
