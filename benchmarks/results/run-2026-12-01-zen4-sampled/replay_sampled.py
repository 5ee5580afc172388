"""Replay the draft policy (no model) on the seeded sampled replies of a res-*.json: with seeded one-hot
verification a draft token is accepted iff it equals the reply's token there, as in greedy decoding, so the
replay of corpus.py holds for sampled replies too. Prints per task n-gram lookup's cost / the prediction's on
the Zen 4 0.5B cost curve, and the geomeans. Run from the repository root:
    PRIORS='prediction/aligned=0.8' python benchmarks/results/run-2026-12-01-zen4-sampled/replay_sampled.py RES.json"""
import sys, os, json, math, importlib.util
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.config import SpeculationParams
from foretell.core.policy import DraftPolicy
from foretell.core import policy as _policy
from foretell.core.prediction import make_proposer
from foretell.core.simulate import simulate_policy
for kv in filter(None, os.environ.get("PRIORS", "").split(";")):
    k, v = kv.split("="); _policy.PRIORS[k] = eval(v)
R = "benchmarks/results/"
def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(os.path.dirname(path)) + "_t", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
sets = [load(R + "run-2026-11-28-spr-heldout/tasks.py"), load(R + "run-2026-12-01-zen4-heldout2/tasks.py")]
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
curve = json.load(open(R + "run-2026-11-30-zen4-int8/realedit-int8-asked/results.json"))["meta"]["cost_curve"]
cost = CostModel({int(k): float(v) for k, v in curve.items() if int(k) > 1})
res = json.load(open(sys.argv[1]))
PROSE = {"explain_go", "review_css", "tests_py", "graph_explain", "openai_doc_ts", "fnm_docs"}
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
ratios = {}
for mod in sets:
    for name, (instr, f, style) in mod.tasks.items():
        if name not in res: continue
        x = res[name]["pred"][0]
        ids = tok.apply_chat_template([{"role": "user", "content": mod.prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
        ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
        out = tok.encode(x["text"], add_special_tokens=False)
        if len(out) < x["tok"]: out.append(min(eos))  # the reply ended with the end of the turn
        pred = tok.encode(mod.prediction_text(f, style), add_special_tokens=False)
        def replay(spec):
            pol = DraftPolicy(make_proposer(ids, spec, classes), cost, True, trees=False, stop_ids=frozenset(eos))
            return simulate_policy(pol, out, 128, None, context=len(ids))
        n = replay(SpeculationParams(prediction=None, method="ngram")); p = replay(SpeculationParams(prediction=tuple(pred)))
        ratios[name] = n.cost / p.cost
        if os.environ.get("ROWS"): print(f"{name:14s} ngram {n.cost:7.1f} ({n.passes}) pred {p.cost:7.1f} ({p.passes}) ratio {ratios[name]:.3f}")
edits = [v for k, v in ratios.items() if k not in PROSE]
print(f"edits {g(edits):.4f} min {min(edits):.3f} | all {g(list(ratios.values())):.4f} min {min(ratios.values()):.3f}")
