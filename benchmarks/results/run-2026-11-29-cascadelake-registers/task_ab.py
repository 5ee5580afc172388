"""Real tasks with p8_tile for short passes (knob 16) against the buffer (0), one engine, alternating per request."""
import time, sys, statistics, ctypes, math
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.engine import cpu_gemm
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.models.loader import load_tokenizer, resolve_model
eng, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False)) if "prefix_cache" in EngineConfig.__dataclass_fields__ else LLMEngine.from_config(EngineConfig())
gemm = cpu_gemm.load()
tok = load_tokenizer(resolve_model(None).path)
tasks = {t.name: t for t in build_tasks(tok, ["realedit", "controls"], WorkloadOptions())[0]}
names = sys.argv[1].split(",")
rounds = int(sys.argv[2])
def run(task, mode):
    spec = SpeculationParams(method="ngram") if mode == "ngram" else SpeculationParams(prediction=task.prediction_ids)
    req = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=task.max_tokens, sampling=SamplingParams(temperature=0), speculation=spec)
    t = time.perf_counter(); out = eng.generate([req]); dt = time.perf_counter() - t
    outs = list(out.values())[0]
    return dt, [x for o in outs for x in o.new_token_ids], outs[-1].stats.forward_passes if hasattr(outs[-1].stats, "forward_passes") else None
ratios = []
for name in names:
    task = tasks[name]
    for mode in ("pred", "ngram"):
        res = {0: [], 16: []}; toks = {}
        for r in range(rounds):
            for arm in ((0, 16) if r % 2 == 0 else (16, 0)):
                gemm.p8_fused_rows = arm
                dt, ids, passes = run(task, mode)
                res[arm].append(dt); toks.setdefault(arm, ids)
        ratio = statistics.median(b / a for a, b in zip(res[0], res[16]))
        ratios.append(ratio)
        print(f"{name:36s} {mode:5s} out {len(toks[16]):4d} passes {passes} buffer {[round(x,2) for x in res[0]]} registers {[round(x,2) for x in res[16]]} ratio {ratio:.3f} same {toks[0] == toks[16]}", flush=True)
print("geomean", round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 3))
gemm.p8_fused_rows = 16
