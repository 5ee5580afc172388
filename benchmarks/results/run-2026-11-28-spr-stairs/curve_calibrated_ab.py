"""Staircase start-up curve vs the old sizes' curve, each with a fresh calibrator (as a fresh server), the bench's
task order: verbatim/perfect then real edits, prediction (auto) and n-gram; arms alternate per round."""
import json, sys
from foretell.config import EngineConfig
from foretell.core.adaptive_k import CostModel, CostCalibrator
from foretell.engine.llm_engine import LLMEngine
from one_request import one_request  # beside this script
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
                print(json.dumps(one_request(engine, task, method, round=rnd, curve=cname)), flush=True)
        print("final curve", cname, engine.cost.points, flush=True)
