"""Long-file tasks with and without the prediction (n-gram lookup on), alternating in one engine, each step's trace
record kept (its time stamp gives the pass time): the trace that showed 17-32-token passes at 1.85 one-token passes.

    .venv/bin/python step_trace_ab.py longfile/rename 4 trace.jsonl
"""
import json, statistics, sys, time
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, longfile_tasks
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False))
tok = engine.tokenizer
tasks = {t.name: t for t in longfile_tasks(tok, WorkloadOptions())}
names = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
out = open(sys.argv[3] if len(sys.argv) > 3 else "trace.jsonl", "w")
recs = []
engine.trace = recs.append
for rnd in range(rounds):
    for name in names:
        task = tasks[name]
        order = ("ngram", "prediction") if rnd % 2 == 0 else ("prediction", "ngram")
        for method in order:
            recs.clear()
            r = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=4096, sampling=SamplingParams(temperature=0.0),
                                  speculation=SpeculationParams(method="auto" if method == "prediction" else method,
                                                                prediction=tuple(task.prediction_ids) if method == "prediction" else None))
            t0 = time.perf_counter()
            chunks = engine.generate([r])[r.request_id]
            dt = time.perf_counter() - t0
            toks = [t for c in chunks for t in c.new_token_ids]
            st = chunks[-1].stats
            print(json.dumps({"round": rnd, "task": name, "method": method, "wall": round(dt, 3), "tokens": len(toks),
                              "passes": st.forward_passes, "hash": hash(tuple(toks))}), flush=True)
            out.write(json.dumps({"round": rnd, "task": name, "method": method, "wall": dt, "steps": recs[:]}) + "\n")
