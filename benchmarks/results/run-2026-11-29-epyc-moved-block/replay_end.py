import json, sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt, prediction_text
from foretell.core.adaptive_k import AttentionCost, CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.config import SpeculationParams
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.core.tokens import TokenClasses
cache = json.load(open(os.environ["COST_JSON"]))
curve = CostModel({int(k): v for k, v in cache["points"].items()}, AttentionCost(**cache["attention"]))
tok = load_tokenizer(resolve_model(None).path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
data = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "heldout-base.json")))
name = sys.argv[1]
instr, f, style = tasks[name]
ids = tok.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
out = list(tok.encode(data[name]["none"][0]["text"], add_special_tokens=False)) + [eos]
pred = list(tok.encode(prediction_text(f, style), add_special_tokens=False))
policy = DraftPolicy(make_proposer(ids, SpeculationParams(prediction=pred), classes), curve, True, trees=False, stop_ids={eos})
pos = 0
while pos < len(out):
    d = policy.decide(min(128, 2048 - pos - 1), context=len(ids) + pos)
    hits = 0
    while hits < len(d.draft.tokens) and pos + hits < len(out) and d.draft.tokens[hits] == out[pos + hits]:
        hits += 1
    emitted = out[pos:pos + hits + 1]
    al = policy.proposer.aligner
    if pos > len(out) - 40 or pos < 10:
        print(pos, d.chosen.context if d.chosen else "-", len(d.draft.tokens), hits, "aligner pos", al.position, "/", len(pred), repr(tok.decode(d.draft.tokens[:12])), "emitted", repr(tok.decode(emitted)))
    policy.record(d, emitted); policy.proposer.observe(emitted)
    pos += len(emitted)
