import json, sys, time
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.core.adaptive_k import CostModel, CostCalibrator
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.bench.workloads import WorkloadOptions, realedit_tasks, verbatim_tasks
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False))
tok = engine.tokenizer
stairs = dict(engine.cost.points)
old = {n: r for n, r in stairs.items() if n in (1, 2, 3, 4, 8, 16, 32, 64, 128, 256)}
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
task = tasks["realedit/markdown_edit"]
recs = []
engine.trace = recs.append
for rnd in range(4):
    for cname in (("old", "stairs") if rnd % 2 == 0 else ("stairs", "old")):
        points = stairs if cname == "stairs" else old
        engine.cost = CostModel(points); engine.calibrator = None
        recs.clear()
        r = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=4096, sampling=SamplingParams(temperature=0.0),
                              speculation=SpeculationParams(method="ngram"))
        t0 = time.perf_counter(); engine.generate([r]); dt = time.perf_counter() - t0
        prev = None; steps = []
        for s in recs:
            steps.append((s["k"], s["accepted"], s["batch_tokens"], round((s["t"] - prev) * 1000) if prev else None)); prev = s["t"]
        print(cname, round(dt, 3), "first pass ms", round(recs[0]["t"] * 1000 - (t0 - engine.started) * 1000), steps, flush=True)
