"""n-gram lookup and the prediction alternated in one fresh engine (the order swapped every round), per task:
time to first token per run, median wall time, passes.
    .venv/bin/python benchmarks/results/run-2026-11-27-spr-policy-bounds/engine_ab.py js_edit,json_edit 4"""
import sys, statistics
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.bench import workloads as W
eng, name = LLMEngine.from_config(EngineConfig(model="qwen2.5-coder-0.5b", prefix_cache=False))
tasks = {t.kind: t for t in W.realedit_tasks(eng.tokenizer, W.WorkloadOptions())}
res = {}
for kind in sys.argv[1].split(","):
    t = tasks[kind]
    for rnd in range(int(sys.argv[2])):
        order = (("ngram", None), ("prediction", t.prediction_ids))
        for method, pred in (order if rnd % 2 == 0 else order[::-1]):
            req = GenerationRequest(prompt_ids=list(t.prompt_ids), max_tokens=t.max_tokens, sampling=SamplingParams(temperature=0.0),
                                    speculation=SpeculationParams(prediction=None if pred is None else tuple(pred)))
            st = eng.generate([req])[req.request_id][-1].stats
            res.setdefault((kind, method), []).append((st.ttft_s, st.ttft_s + st.decode_s, st.forward_passes))
for (kind, method), v in res.items():
    print(kind, method, "ttft", [round(x[0], 2) for x in v], "median", round(statistics.median(x[0] for x in v), 3), "wall median", round(statistics.median(x[1] for x in v), 2), "passes", v[0][2])
