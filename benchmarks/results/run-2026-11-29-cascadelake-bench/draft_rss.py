"""RSS after start-up of the 1.5B with its default drafter (the 0.5B), and a draft-model request works."""
import ctypes, gc, os
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
eng, _ = LLMEngine.from_config(EngineConfig(model="qwen2.5-coder-1.5b", draft_model="qwen2.5-coder-0.5b"))
gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
print(f"after start-up {rss():.0f} MB; drafter token cost {eng.drafter.token_cost:.3f}", flush=True)
ids = eng.tokenizer.apply_chat_template([{"role": "user", "content": "Write a Python function that reverses a list."}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
outs = {}
for method in ("draft", "none"):
    got = eng.generate([GenerationRequest(prompt_ids=ids, max_tokens=48, sampling=SamplingParams(temperature=0.0), speculation=SpeculationParams(method=method))])
    outs[method] = [t for o in next(iter(got.values())) for t in o.new_token_ids]
    print(method, "passes", next(iter(got.values()))[-1].stats.forward_passes, flush=True)
print("same", outs["draft"] == outs["none"])
