import sys, time
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine import cost
eng, name = LLMEngine.from_config(EngineConfig(model=sys.argv[1], prefix_cache=False))
for i in range(int(sys.argv[2])):
    t = time.perf_counter(); sp = {}
    pts = cost.measure_cost_points(eng.runner, spread=sp)
    print(f"{time.perf_counter()-t:.1f}s", pts, "spread", {n: round(v, 2) for n, v in sp.items()}, flush=True)
