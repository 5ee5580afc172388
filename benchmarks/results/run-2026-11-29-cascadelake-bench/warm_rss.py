"""RSS of the engine after start-up, after requests (a 1,000-token prompt with and without the file as the
prediction), and after malloc_trim: is the growth live memory or freed heap glibc keeps? python warm_rss.py MODEL"""
import ctypes, gc, os, sys
sys.path.insert(0, "benchmarks/results/run-2026-11-28-spr-heldout")
from tasks import tasks, prompt, prediction_text
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
eng, _ = LLMEngine.from_config(EngineConfig(model=sys.argv[1] if len(sys.argv) > 1 else "default"))
print(f"after start-up {rss():.0f} MB", flush=True)
instr, f, style = tasks["py_rename"]
ids = eng.tokenizer.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
pred = tuple(eng.tokenizer.encode(prediction_text(f, style)))
for method, p in (("auto", pred), ("none", None)):
    eng.generate([GenerationRequest(prompt_ids=ids, max_tokens=int(sys.argv[2]) if len(sys.argv) > 2 else 64,
                                    sampling=SamplingParams(temperature=0.0), speculation=SpeculationParams(method=method, prediction=p))])
    print(f"after a request ({method}, {len(ids)}-token prompt) {rss():.0f} MB", flush=True)
gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
print(f"after malloc_trim {rss():.0f} MB", flush=True)
