"""A request's proposer and first decision for a long-file edit (textwrap.py, 491 lines, in the prompt and as the
prediction; /tmp/long51.json is written by saving one such request's messages and reply, see NOTES.md).
Run with PYTHONPATH pointing at the old and the new source tree in turn."""
import json, time
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
import foretell.core.prediction as prediction
from foretell.core.policy import DraftPolicy
from foretell.core.adaptive_k import CostModel
from foretell.config import SpeculationParams
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
d = json.load(open("/tmp/long51.json"))
prompt = tok.apply_chat_template(d["msgs"], add_generation_prompt=True, tokenize=True)
prompt = list(prompt["input_ids"]) if not isinstance(prompt, list) else prompt
pred = tuple(tok.encode(d["code"], add_special_tokens=False))
curve = CostModel({2: 1.0, 32: 1.5, 128: 4.0})
ts = []
for _ in range(10):
    t = time.perf_counter()
    p = DraftPolicy(prediction.make_proposer(prompt, SpeculationParams(prediction=pred), classes), curve)
    d0 = p.decide(128)
    ts.append(time.perf_counter() - t)
print(f"prompt {len(prompt)} tokens, prediction {len(pred)}: proposer + first decision {min(ts)*1e3:.2f} ms")
