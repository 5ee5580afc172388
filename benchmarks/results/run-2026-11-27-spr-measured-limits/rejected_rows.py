"""What the rejected draft rows of each real-edit run cost, on the engine's own curve: per pass the cost of its
draft beyond the accepted tokens and the target's own, as a share of the run's decode cost (an upper bound on
what skipping the output head for those rows could save).
"""
import time, sys, collections
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=False))
recs = []; engine.trace = recs.append
cost = engine.cost
for task in realedit_tasks(engine.tokenizer, WorkloadOptions(max_tokens=448)):
    for method in ("ngram", "prediction"):
        recs.clear()
        req = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=task.max_tokens, sampling=SamplingParams(temperature=0.0),
                                speculation=SpeculationParams(prediction=task.prediction_ids if method == "prediction" else None, method="auto"))
        engine.generate([req])
        tot = sum(cost.ratio((r.get("k") or 0) + 1) for r in recs[1:])
        # cost if head rows after first rejection were free: approximate head share h of the marginal row cost
        saved = 0.0
        for r in recs[1:]:
            k = r.get("k") or 0; a = r.get("accepted") or 0
            if k > a:
                saved += cost.ratio(k + 1) - cost.ratio(a + 2)
        print(f"{task.name:28} {method:10} passes={len(recs):4} decode-cost={tot:7.1f} rejected-rows-cost={saved:6.1f} ({saved/tot*100:4.1f}%)", flush=True)
