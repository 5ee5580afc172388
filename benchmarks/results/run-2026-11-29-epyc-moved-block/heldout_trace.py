"""In-engine, one held-out task: ngram vs pred arms with the per-step trace; per-step k, accepted, dt."""
import sys, os, json, statistics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt, prediction_text
from foretell.bench.harness import BenchOptions, load_engine, run_engine
from foretell.config import SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.config import SamplingParams
opts = BenchOptions(suites=("realedit",), dtype="auto")
engine, _, _ = load_engine(opts)
tok = engine.tokenizer
name = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
instr, f, style = tasks[name]
ids = tok.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
pred = list(tok.encode(prediction_text(f, style), add_special_tokens=False))
greedy = SamplingParams(temperature=0.0)
arms = {"ngram": SpeculationParams(method="ngram"), "pred": SpeculationParams(prediction=pred)}
out_recs = {}
for r in range(rounds):
    for arm, spec in (list(arms.items())[::-1] if r % 2 else arms.items()):
        recs = []
        engine.trace = recs.append
        (out,), _ = run_engine(engine, [GenerationRequest(prompt_ids=ids, max_tokens=2048, sampling=greedy, speculation=spec)], arm)
        engine.trace = None
        ts = [x["t"] for x in recs]
        rows = sum(1 + x["k"] for x in recs)
        dec = ts[-1] - ts[0]
        print(f"{name} {arm} r{r}: wall {out.wall_s:.2f} ttft {out.ttft_s:.2f} decode {dec:.2f} passes {out.forward_passes} rows {rows}", flush=True)
        out_recs[arm] = recs
json.dump(out_recs, open(f"/tmp/trace_{name}.json", "w"))
