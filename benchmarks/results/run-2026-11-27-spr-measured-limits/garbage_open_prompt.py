"""The open-prompt control in-engine: no prediction against a garbage prediction, alternating, N rounds; per run
the passes, the policy's summed cost, and drafted/accepted tokens per source.

    .venv/bin/python benchmarks/results/run-2026-11-27-spr-measured-limits/garbage_open_prompt.py 3
"""
import time, sys, statistics, collections
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, control_tasks
engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=False))
recs = []; engine.trace = recs.append
tasks = [t for t in control_tasks(engine.tokenizer, WorkloadOptions()) if t.name in ("controls/open:no_prediction", "controls/open:garbage")]
res = collections.defaultdict(list)
for rnd in range(int(sys.argv[1])):
    for task in tasks:
        recs.clear()
        req = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=task.max_tokens, sampling=SamplingParams(temperature=0.0),
                                speculation=SpeculationParams(prediction=task.prediction_ids, method="auto"))
        t = time.perf_counter(); engine.generate([req]); dt = time.perf_counter() - t
        drafted = collections.Counter(); acc = collections.Counter(); costsum = 0
        for r in recs:
            drafted[r.get("source")] += r.get("k") or 0; acc[r.get("source")] += r.get("accepted") or 0; costsum += r.get("cost", 1)
        res[task.name].append(dt)
        print(task.name, f"{dt:.2f}s passes={len(recs)} cost_sum={costsum:.1f} drafted={dict(drafted)} acc={dict(acc)}", flush=True)
for n, v in res.items(): print(n, "median", statistics.median(v))
