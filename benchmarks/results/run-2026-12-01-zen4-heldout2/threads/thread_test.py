"""The engine stepped in the main thread, then in a second thread (after the main thread loaded it and ran steps),
then in the main thread again: the Go explanation prompt (1,444 tokens), 300 tokens of plain decoding each; the
median and mean step. Run from the repository root: python benchmarks/results/run-2026-12-01-zen4-heldout2/threads/thread_test.py"""
import sys, time, threading
sys.path.insert(0, "benchmarks/results/run-2026-11-28-spr-heldout")
from tasks import tasks, prompt
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
engine, _ = LLMEngine.from_config(EngineConfig(model="default", dtype="auto"))
tok = engine.tokenizer
instr, f, style = tasks["explain_go"]
ids = tok.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
def run(method, n=300):
    engine.add_request(GenerationRequest(ids, n, SamplingParams(temperature=0.0), SpeculationParams(method=method), ignore_eos=True))
    times = []
    while engine.has_unfinished():
        t = time.perf_counter(); engine.step(); times.append(time.perf_counter() - t)
    dec = sorted(times[2:])
    print(f"{threading.current_thread().name:10s} {method}: median {1000*dec[len(dec)//2]:.1f} ms, mean {1000*sum(dec)/len(dec):.1f} ms", flush=True)
run("none")
run("none")
th = threading.Thread(target=lambda: (run("none"), run("none")), name="worker"); th.start(); th.join()
run("none")
