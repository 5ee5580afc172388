"""Real edits: time to first token and wall, prediction vs n-gram alone, alternating in one engine; the first
steps of each request's trace."""
import json, os, sys, time
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.bench.workloads import realedit_tasks, WorkloadOptions
trace = "/tmp/fp_trace.jsonl"
if os.path.exists(trace): os.remove(trace)
eng, tok = LLMEngine.from_config(EngineConfig(trace_path=trace, enable_prefix_cache=False) if "enable_prefix_cache" in EngineConfig.__dataclass_fields__ else EngineConfig(trace_path=trace))
tasks = {t.name.split("/")[-1]: t for t in realedit_tasks(eng.tokenizer, WorkloadOptions())}
for name in sys.argv[1].split(","):
    t = tasks[name]
    res = {}
    for r in range(int(sys.argv[2])):
        for arm in (("pred", "ngram") if r % 2 == 0 else ("ngram", "pred")):
            spec = SpeculationParams(method="auto", prediction=tuple(t.prediction_ids)) if arm == "pred" \
                else SpeculationParams(method="ngram")
            req = GenerationRequest(prompt_ids=t.prompt_ids, max_tokens=t.max_tokens,
                                    sampling=SamplingParams(temperature=0), speculation=spec)
            eng.add_request(req)
            s = time.perf_counter(); first = None; steps = 0
            while eng.has_unfinished():
                outs = eng.step(); steps += 1
                if first is None and any(o.new_token_ids for o in outs): first = time.perf_counter() - s
            wall = time.perf_counter() - s
            res.setdefault(arm, []).append((round(first, 2), round(wall, 2), steps))
    print(name, res, flush=True)
