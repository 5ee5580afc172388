"""The long-file one_default task (the bench's, prefix cache off), n-gram lookup and the prediction alternating
(ABBA), each run's wall time and passes, with the engine's per-step trace (--trace) in TRACE."""
import sys, time
from foretell.config import EngineConfig, SpeculationParams
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, longfile_tasks
from foretell.bench.harness import request_for, bench_sampling
trace = sys.argv[1]
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False, trace_path=trace))
task = next(t for t in longfile_tasks(engine.tokenizer, WorkloadOptions()) if t.name.endswith("one_default"))
arms = {"ngram": SpeculationParams(prediction=None), "prediction": SpeculationParams(prediction=task.prediction_ids)}
for name in ("ngram", "prediction", "prediction", "ngram"):
    req = request_for(task, arms[name], sampling=bench_sampling(0.0, None))
    passes0, t = engine.forward_passes, time.perf_counter()
    outs = engine.generate([req])
    toks = sum(len(o.new_token_ids) for o in outs[req.request_id])
    print(f"{name:10s} {time.perf_counter() - t:6.1f} s  {engine.forward_passes - passes0} passes  {toks} tokens  "
          f"cost c(16)={engine.cost.ratio(16):.2f} c(22)={engine.cost.ratio(22):.2f} c(48)={engine.cost.ratio(48):.2f}", flush=True)
