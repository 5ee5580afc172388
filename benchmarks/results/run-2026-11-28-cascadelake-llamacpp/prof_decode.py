import time, sys, torch
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
eng, name = LLMEngine.from_config(EngineConfig())
tok = eng.tokenizer
ids = tok.apply_chat_template([{"role": "user", "content": "Write a long story about a robot who learns to paint."}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
def run(n, prof=False):
    req = GenerationRequest(prompt_ids=ids, max_tokens=n, sampling=SamplingParams(temperature=0), speculation=SpeculationParams(method="none"))
    eng.add_request(req)
    eng.step()  # prefill
    times = []
    while eng.has_unfinished():
        t = time.perf_counter(); eng.step(); times.append(time.perf_counter() - t)
    return times
run(20)
t = run(60); t.sort(); print("decode step ms: median", round(1000 * t[len(t)//2], 1), "min", round(1000 * t[0], 1))
if len(sys.argv) > 1:
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU]) as p:
        run(30)
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
