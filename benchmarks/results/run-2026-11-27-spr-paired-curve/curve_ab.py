"""Perfect prediction on the snake with two cost curves, interleaved: which drafts decode faster here."""
import sys, json
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.core.adaptive_k import CostModel
from foretell.bench import workloads as W
eng, name = LLMEngine.from_config(EngineConfig(model="default", prefix_cache=False))
t = W.verbatim_tasks(eng.tokenizer, W.WorkloadOptions())[0]
curves = json.loads(sys.argv[1])
def run(method, pred):
    req = GenerationRequest(prompt_ids=list(t.prompt_ids), max_tokens=t.max_tokens, sampling=SamplingParams(temperature=0.0),
                        speculation=SpeculationParams(method=method, prediction=pred))
    outs = eng.generate([req])[req.request_id]
    return [i for o in outs for i in o.new_token_ids], outs[-1].stats
ids, _ = run("ngram", None)
res = {k: [] for k in curves}
for rep in range(int(sys.argv[2])):
    for label, pts in curves.items():
        eng.cost = CostModel({int(k): v for k, v in pts.items()})
        if getattr(eng, "calibrator", None) is not None: eng.calibrator = None
        _, st = run("prediction", tuple(ids))
        res[label].append((round(st.decode_s, 3), st.forward_passes))
        print(label, st.decode_s, st.forward_passes, flush=True)
for label, v in res.items():
    d = sorted(x[0] for x in v); print(label, "decode min %.2f median %.2f" % (d[0], d[len(d)//2]), "passes", [x[1] for x in v])
