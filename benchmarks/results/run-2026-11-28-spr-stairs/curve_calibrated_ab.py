"""Staircase start-up curve vs the old sizes' curve, each with a fresh calibrator (as a fresh server), the bench's
task order: verbatim/perfect then real edits, prediction (auto) and n-gram; arms alternate per round."""
import json, sys, time
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.core.adaptive_k import CostModel, CostCalibrator
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, realedit_tasks, verbatim_tasks
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False))
tok = engine.tokenizer
stairs = dict(engine.cost.points)
old = {n: r for n, r in stairs.items() if n in (1, 2, 3, 4, 8, 16, 32, 64, 128, 256)}
tasks = verbatim_tasks(tok, WorkloadOptions()) + realedit_tasks(tok, WorkloadOptions())
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
for rnd in range(rounds):
    for cname in (("old", "stairs") if rnd % 2 == 0 else ("stairs", "old")):
        points = stairs if cname == "stairs" else old
        engine.cost = CostModel(points)
        engine.calibrator = CostCalibrator(points)
        for task in tasks:
            for method in ("ngram", "prediction"):
                if task.prediction_ids is None and method == "prediction": continue
                r = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=4096, sampling=SamplingParams(temperature=0.0),
                                      speculation=SpeculationParams(method="auto" if method == "prediction" else "ngram",
                                                                    prediction=tuple(task.prediction_ids) if method == "prediction" else None))
                t0 = time.perf_counter()
                chunks = engine.generate([r])[r.request_id]
                dt = time.perf_counter() - t0
                toks = [t for c in chunks for t in c.new_token_ids]
                print(json.dumps({"round": rnd, "task": task.name, "curve": cname, "method": method, "wall": round(dt, 3),
                                  "tokens": len(toks), "passes": chunks[-1].stats.forward_passes, "hash": hash(tuple(toks))}), flush=True)
        print("final curve", cname, engine.cost.points, flush=True)
