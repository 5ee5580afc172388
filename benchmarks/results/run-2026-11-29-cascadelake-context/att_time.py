import time, sys
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine import cost
eng, _ = LLMEngine.from_config(EngineConfig(model=sys.argv[1] if len(sys.argv) > 1 else None, measure_cost_curve=False))
for _ in range(2):
    t = time.perf_counter()
    att = cost.measure_attention_cost(eng.runner, [1, 2, 4, 8, 16, 32, 64])
    print(f"attention measured in {time.perf_counter() - t:.1f} s: {att}", flush=True)
