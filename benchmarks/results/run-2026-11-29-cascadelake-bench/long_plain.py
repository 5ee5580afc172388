"""Plain decoding of 1600 tokens (ignore_eos) on the 0.5B after a short prompt: ms per step early and late, to see
whether a step's cost grows with the output beyond attention's share."""
import time, statistics
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
eng, _ = LLMEngine.from_config(EngineConfig(measure_cost_curve=False, prefix_cache=False))
prompt = eng.tokenizer.apply_chat_template([{"role": "user", "content": "Write a long Python module with many classes."}],
                                           add_generation_prompt=True, tokenize=True)
prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
req = GenerationRequest(prompt_ids=prompt, max_tokens=1600, sampling=SamplingParams(temperature=0.0),
                        speculation=SpeculationParams(method="none"), ignore_eos=True)
eng.add_request(req)
stamps = []
while eng.has_unfinished():
    eng.step(); stamps.append(time.perf_counter())
d = [b - a for a, b in zip(stamps, stamps[1:])]
for lo in (0, 200, 800, 1400):
    seg = d[lo:lo + 200]
    print(f"steps {lo}-{lo + len(seg)}: median {statistics.median(seg) * 1000:.1f} ms", flush=True)
