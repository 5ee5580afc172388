"""In-engine, temperature 1 (OpenAI's default): prediction vs n-gram lookup alone, alternating, several seeds."""
import sys, time, statistics, os
sys.path.insert(0, "benchmarks/results/run-2026-11-28-spr-heldout")
from tasks import tasks, prompt, prediction_text
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
eng, _ = LLMEngine.from_config(EngineConfig())
names = sys.argv[1].split(",")
T = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
for name in names:
    instr, f, style = tasks[name]
    ids = eng.tokenizer.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    pred = tuple(eng.tokenizer.encode(prediction_text(f, style)))
    def run(arm, seed):
        spec = SpeculationParams(method="auto", prediction=pred if arm == "pred" else None)
        req = GenerationRequest(prompt_ids=ids, max_tokens=1024, sampling=SamplingParams(temperature=T, seed=seed), speculation=spec)
        t = time.perf_counter(); out = eng.generate([req]); dt = time.perf_counter() - t
        last = list(out.values())[0][-1]
        return dt, last.stats.forward_passes, len(last.token_ids) if hasattr(last, "token_ids") else None, last
    run("none", 0)
    res = {"pred": [], "none": []}
    for seed in range(4):
        for arm in (("pred", "none") if seed % 2 == 0 else ("none", "pred")):
            dt, passes, n, last = run(arm, seed)
            res[arm].append((dt, passes, last.stats))
    tp = [x[0] for x in res["pred"]]; tn = [x[0] for x in res["none"]]
    print(name, "T", T, "pred", [round(x, 2) for x in tp], [x[1] for x in res["pred"]], "none", [round(x, 2) for x in tn], [x[1] for x in res["none"]],
          "sum none/pred", round(sum(tn) / sum(tp), 3), flush=True)
