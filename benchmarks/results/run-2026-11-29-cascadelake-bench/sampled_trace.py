import sys, time, collections
sys.path.insert(0, "benchmarks/results/run-2026-11-28-spr-heldout")
from tasks import tasks, prompt, prediction_text
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
eng, _ = LLMEngine.from_config(EngineConfig())
name, T, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
instr, f, style = tasks[name]
ids = eng.tokenizer.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
pred = tuple(eng.tokenizer.encode(prediction_text(f, style)))
recs = []; eng.trace = recs.append
for arm in ("none", "pred", "none", "pred"):
    spec = SpeculationParams(method="auto", prediction=pred if arm == "pred" else None)
    req = GenerationRequest(prompt_ids=ids, max_tokens=1024, sampling=SamplingParams(temperature=T, seed=seed), speculation=spec)
    recs.clear(); t = time.perf_counter(); out = eng.generate([req]); dt = time.perf_counter() - t
    ks = sum(r["k"] for r in recs); acc = sum(r["accepted"] for r in recs)
    byctx = collections.defaultdict(lambda: [0, 0, 0])
    for r in recs:
        c = byctx[r.get("context", "none")]; c[0] += 1; c[1] += r["k"]; c[2] += r["accepted"]
    print(arm, f"{dt:.2f}s steps {len(recs)} drafted {ks} accepted {acc} cost {sum(r['cost'] for r in recs):.1f}", dict(byctx))
    if arm == "pred":
        print("   ", " ".join(f"{r.get('context','none').split('/')[-1]}:{r['k']}/{r['accepted']}" for r in recs[:80]))
