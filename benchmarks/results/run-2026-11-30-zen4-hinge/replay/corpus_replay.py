import sys, os; sys.path.insert(0, os.path.dirname(__file__)); import patch_rw
import json, math
from foretell.config import SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.core.simulate import simulate_policy
from foretell.core.tokens import TokenClasses
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
classes = TokenClasses.from_tokenizer(tok)
res = json.load(open(sys.argv[2]))
cost = CostModel({int(k): v for k, v in res["meta"]["cost_curve"].items()})
d = json.load(open("src/foretell/bench/data/recorded_outputs.json"))
eos = frozenset({tok.convert_tokens_to_ids("<|im_end|>")})
tot_f = tot_n = 0.0; ratios = []
for t in d["tasks"]:
    pred, out = t["prediction_ids"], t["output_ids"]
    prompt = list(pred)  # the file in the prompt
    def replay(spec):
        pol = DraftPolicy(make_proposer(prompt, spec, classes), cost, True, trees=False, stop_ids=eos)
        return simulate_policy(pol, out, 128, None, context=len(prompt))
    f = replay(SpeculationParams(prediction=tuple(pred)))
    tot_f += f.cost
    ratios.append(f.cost)
print("corpus total cost", round(tot_f, 1), "geomean cost", round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 3))
