import time, sys, torch, cProfile, pstats, random
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
eng, name = LLMEngine.from_config(EngineConfig())
print("kernel_rows", eng.pool.kernel_rows, "dtype", next(eng.runner.model.parameters()).dtype, "threads", torch.get_num_threads())
rng = random.Random(0)
def run():
    ids = [rng.randrange(1000, 20000) for _ in range(1000)]
    req = GenerationRequest(prompt_ids=ids, max_tokens=1, sampling=SamplingParams(temperature=0), speculation=SpeculationParams(method="none"))
    eng.add_request(req)
    while eng.has_unfinished():
        t = time.perf_counter(); eng.step(); print("step", round(time.perf_counter() - t, 2), flush=True)
run()
cProfile.run("run()", "/tmp/pre.prof")
pstats.Stats("/tmp/pre.prof").sort_stats("tottime").print_stats(18)
