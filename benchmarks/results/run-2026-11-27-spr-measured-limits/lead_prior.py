"""The prediction's first draft (context prediction/lead): the real-edit tasks (the port and the docstrings left
out) with the packaged prior and with the priors given as arguments, three rounds, medians.

    .venv/bin/python benchmarks/results/run-2026-11-27-spr-measured-limits/lead_prior.py "(0.9, 4.0)" "(0.95, 8.0)"
"""
import time, sys, statistics
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
import foretell.core.policy as pol
engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=False))
recs = []; engine.trace = recs.append
tasks = [t for t in realedit_tasks(engine.tokenizer, WorkloadOptions(max_tokens=448)) if not any(s in t.name for s in ("port", "docstrings"))]
base = dict(pol.PRIORS)
variants = {"base": base["prediction/lead"]} | {v: eval(v) for v in sys.argv[1:]}
res = {}
for rnd in range(3):
    for task in tasks:
        for name, prior in variants.items():
            pol.PRIORS["prediction/lead"] = prior
            recs.clear()
            req = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=task.max_tokens, sampling=SamplingParams(temperature=0.0),
                                    speculation=SpeculationParams(prediction=task.prediction_ids, method="auto"))
            t = time.perf_counter(); out = engine.generate([req])[req.request_id]; dt = time.perf_counter() - t
            toks = [x for c in out for x in c.new_token_ids]
            res.setdefault((task.name, name), []).append((dt, len(recs), recs[0].get("k"), recs[0].get("accepted"), hash(tuple(toks))))
for task in tasks:
    line = task.name
    for name in variants:
        r = res[(task.name, name)]
        line += f" | {name}: {statistics.median(x[0] for x in r):.2f}s passes={r[0][1]} k0={r[0][2]} acc0={r[0][3]}"
    same = len({x[4] for n in variants for x in res[(task.name, n)]}) == 1
    print(line, "same" if same else "DIFF", flush=True)
for name in variants:
    print(name, "geomean s", statistics.geometric_mean(statistics.median(x[0] for x in res[(t.name, name)]) for t in tasks))
