"""k_max 128 vs 256 (engine built with 256, requests cap 128 or not), interleaved, real passes and decode time."""
import sys, json, statistics
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.bench import workloads as W
eng, name = LLMEngine.from_config(EngineConfig(model="default", prefix_cache=False, k_max=int(sys.argv[2]) if len(sys.argv) > 2 else 256))
print("curve", eng.cost.points if hasattr(eng, "cost") else None, flush=True)
opts = W.WorkloadOptions(); tasks = {}
for fn in (W.realedit_tasks, W.verbatim_tasks):
    for t in fn(eng.tokenizer, opts): tasks.setdefault(t.name, t)
def run(t, method, pred, kmax):
    req = GenerationRequest(prompt_ids=list(t.prompt_ids), max_tokens=t.max_tokens, sampling=SamplingParams(temperature=0.0),
                        speculation=SpeculationParams(method=method, prediction=pred, k_max=kmax))
    outs = eng.generate([req])[req.request_id]
    return [i for o in outs for i in o.new_token_ids], outs[-1].stats
names = sys.argv[1].split(",")
reps = 3
for n in names:
    t = tasks[n]
    plain, st0 = run(t, "none", None, None)
    pred = tuple(plain) if n == "snake/perfect" else t.prediction_ids
    res = {}
    for rep in range(reps):
        for label, method, kmax in (("pred128", "auto", 128), ("pred256", "auto", None), ("ngram128", "ngram", 128), ("ngram256", "ngram", None)):
            ids, st = run(t, method, pred if method == "auto" else None, kmax)
            res.setdefault(label, []).append((st.ttft_s + st.decode_s, st.decode_s, st.forward_passes, ids == plain))
    plain_tpt = st0.decode_s / max(1, len(plain) - 1)
    for label, v in res.items():
        w = statistics.median(x[0] for x in v); d = statistics.median(x[1] for x in v)
        print(f"{n:24s} {label:9s} wall med {w:.2f} [{min(x[0] for x in v):.2f}-{max(x[0] for x in v):.2f}] decode med {d:.2f} decode× {(len(plain)-1)*plain_tpt/d:.1f} passes {[x[2] for x in v]} identical {all(x[3] for x in v)}", flush=True)
