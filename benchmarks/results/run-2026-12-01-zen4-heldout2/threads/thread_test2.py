"""The engine loaded and stepped in one thread that is not the main thread (the main thread runs no torch at all).
Run from the repository root."""
import sys, time, threading
sys.path.insert(0, "benchmarks/results/run-2026-11-28-spr-heldout")
from tasks import tasks, prompt
def body():
    from foretell.config import EngineConfig, SamplingParams, SpeculationParams
    from foretell.engine.llm_engine import LLMEngine
    from foretell.engine.api import GenerationRequest
    engine, _ = LLMEngine.from_config(EngineConfig(model="default", dtype="auto"))
    tok = engine.tokenizer
    instr, f, style = tasks["explain_go"]
    ids = tok.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
    for _ in range(3):
        engine.add_request(GenerationRequest(ids, 300, SamplingParams(temperature=0.0), SpeculationParams(method="none"), ignore_eos=True))
        times = []
        while engine.has_unfinished():
            t = time.perf_counter(); engine.step(); times.append(time.perf_counter() - t)
        dec = sorted(times[2:])
        print(f"{threading.current_thread().name}: median {1000*dec[len(dec)//2]:.1f} ms, mean {1000*sum(dec)/len(dec):.1f} ms", flush=True)
th = threading.Thread(target=body, name="only-worker"); th.start(); th.join()
