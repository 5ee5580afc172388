"""The draft policy on the curve measured at the tile boundaries (16m + 1 beside 16m: the staircase) against the
same curve without those points (interpolated 16..32..64..128, as before), prediction and n-gram lookup, real
edits and long-file edits; one engine, the arms alternating per task, the calibrator off."""
import json, sys
from foretell.config import EngineConfig
from foretell.core.adaptive_k import CostModel
from foretell.engine.llm_engine import LLMEngine
from one_request import one_request  # beside this script
from foretell.bench.workloads import WorkloadOptions, longfile_tasks, realedit_tasks
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False))
engine.calibrator = None
tok = engine.tokenizer
stairs = engine.cost
old = CostModel({n: r for n, r in stairs.points.items() if n in (2, 3, 4, 8, 16, 32, 64, 128, 256)})
print("stairs", stairs.points, "\nold", old.points, flush=True)
suites = sys.argv[1].split(",") if len(sys.argv) > 1 else ["realedit", "longfile"]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
tasks = (realedit_tasks(tok, WorkloadOptions()) if "realedit" in suites else []) + (longfile_tasks(tok, WorkloadOptions()) if "longfile" in suites else [])
arms = [("old", "ngram"), ("stairs", "ngram"), ("old", "prediction"), ("stairs", "prediction")]
for rnd in range(rounds):
    for task in tasks:
        order = arms if rnd % 2 == 0 else arms[::-1]
        for cname, method in order:
            engine.cost = stairs if cname == "stairs" else old
            print(json.dumps(one_request(engine, task, method, round=rnd, curve=cname)), flush=True)
