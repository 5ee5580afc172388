"""n-gram lookup, the prediction, and the prediction without a long first draft ("lead"/"start" priors near 0),
alternating in one engine over real-edit tasks (5 rounds after one warm-up; whole requests, prefill included).
    .venv/bin/python benchmarks/results/run-2026-11-28-spr-layer-glue/ngram_vs_prediction_ab.py markdown_edit,json_edit,bug_fix
"""
import statistics, time, sys
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
from foretell.core import policy as pol
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False))
tok = engine.tokenizer
tasks = {t.name.split("/")[-1]: t for t in realedit_tasks(tok, WorkloadOptions())}
names = sys.argv[1].split(",")
lead = dict(pol.PRIORS)
res = {}
for rnd in range(6):
    for name in names:
        t = tasks[name]
        variants = [("ngram", SpeculationParams(method="ngram"), None), ("pred", SpeculationParams(prediction=tuple(t.prediction_ids)), None),
                    ("pred-nolead", SpeculationParams(prediction=tuple(t.prediction_ids)), {**lead, "prediction/lead": (0.05, 4.0), "prediction/start": (0.05, 4.0)})]
        if rnd % 2: variants.reverse()
        for label, spec, priors in variants:
            pol.PRIORS.clear(); pol.PRIORS.update(priors or lead)
            r = GenerationRequest(prompt_ids=t.prompt_ids, max_tokens=t.max_tokens, sampling=SamplingParams(temperature=0.0), speculation=spec)
            t0 = time.perf_counter()
            chunks = engine.generate([r])[r.request_id]
            dt = time.perf_counter() - t0
            if rnd: res.setdefault((name, label), []).append((dt, chunks[-1].stats.forward_passes, len(chunks[0].new_token_ids)))
pol.PRIORS.clear(); pol.PRIORS.update(lead)
for name in names:
    for label in ("ngram", "pred", "pred-nolead"):
        v = res[(name, label)]
        print(name, label, f"median {statistics.median(x[0] for x in v):.3f} s", "first chunk", v[0][2], "passes", v[0][1])
