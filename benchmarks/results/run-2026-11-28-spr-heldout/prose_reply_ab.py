"""The prose-reply control in-engine: with the file as prediction vs none, alternating; wall, TTFT, passes, cost, per-pass ms."""
import time, sys, statistics, collections
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, control_tasks
engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=False))
recs = []; engine.trace = recs.append
task = next(t for t in control_tasks(engine.tokenizer, WorkloadOptions()) if t.kind == "prose_reply")
out = collections.defaultdict(list)
for rnd in range(int(sys.argv[1])):
    arms = [("pred", task.prediction_ids), ("none", None)]
    for arm, pred in (arms if rnd % 2 == 0 else arms[::-1]):
        recs.clear()
        req = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=task.max_tokens, sampling=SamplingParams(temperature=0.0),
                                speculation=SpeculationParams(prediction=pred, method="auto"))
        t = time.perf_counter(); res = engine.generate([req]); dt = time.perf_counter() - t
        ts = [r["t"] for r in recs]
        steps = [b - a for a, b in zip(ts, ts[1:])]
        cost = sum(r["cost"] for r in recs[1:])
        by = collections.Counter(r["source"] for r in recs)
        first = recs[0]
        out[arm].append(dt)
        print(f"{arm:5} {dt:.2f}s passes={len(recs)} first: t={first['t']:.2f} k={first['k']} src={first['source']} | decode cost={cost:.1f} median step {1000*statistics.median(steps):.1f}ms mean {1000*statistics.mean(steps):.1f}ms sources={dict(by)}", flush=True)
for a, v in out.items(): print(a, "median", round(statistics.median(v), 2))
