"""Whole requests on two engines in one process, the int8 route (A) and the bf16 route (B), each with its own
measured cost curve, alternating per request (the order flipping every round): the held-out-like tasks' prompts,
with and without the prediction, greedy, the prefix cache warmed first.

    python requests_ab.py ROUNDS task[,task...] [max_tokens]
"""
import os, statistics, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt, prediction_text
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine

rounds, names = int(sys.argv[1]), sys.argv[2].split(",")
maxt = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
engines = {"A": LLMEngine.from_config(EngineConfig(int8_linears=True))[0],
           "B": LLMEngine.from_config(EngineConfig(int8_linears=False))[0]}
print("int8 layers", {k: e.runner.int8_layers for k, e in engines.items()}, flush=True)


def run(engine, ids, pred):
    spec = SpeculationParams(method="auto", prediction=None if pred is None else tuple(pred))
    req = GenerationRequest(prompt_ids=ids, max_tokens=maxt, sampling=SamplingParams(temperature=0), speculation=spec)
    t = time.perf_counter()
    out = engine.generate([req])[req.request_id]
    return time.perf_counter() - t, [x for o in out for x in o.new_token_ids], out[-1].stats.forward_passes


ratios = {"pred": [], "none": []}
for name in names:
    instr, f, style = tasks[name]
    tok = engines["A"].tokenizer
    ids = tok.apply_chat_template([{"role": "user", "content": prompt(instr, f, style)}], add_generation_prompt=True,
                                  tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    pred = tok.encode(prediction_text(f, style), add_special_tokens=False)
    for e in engines.values():
        run(e, ids, None)  # warm the prefix cache (and the first pass)
    res = {}
    arms = [(s, a) for s in "AB" for a in ("pred", "none")]
    for r in range(rounds):
        for s, a in (arms if r % 2 == 0 else arms[::-1]):
            res.setdefault(s + a, []).append(run(engines[s], ids, pred if a == "pred" else None))
    med = {k: statistics.median(x[0] for x in v) for k, v in res.items()}
    lossless = all(x[1] == res[s + "none"][0][1] for s in "AB" for x in res[s + "pred"] + res[s + "none"])
    same = res["Anone"][0][1] == res["Bnone"][0][1]
    for a in ("pred", "none"):
        ratios[a].append(med["A" + a] / med["B" + a])
    print(f"{name:14} tok {len(res['Anone'][0][1])}/{len(res['Bnone'][0][1])} | A/B pred {med['Apred'] / med['Bpred']:.2f} "
          f"none {med['Anone'] / med['Bnone']:.2f} | pred/none A {med['Anone'] / med['Apred']:.2f} B {med['Bnone'] / med['Bpred']:.2f} "
          f"| passes A {res['Apred'][0][2]}/{res['Anone'][0][2]} B {res['Bpred'][0][2]}/{res['Bnone'][0][2]} | same A=B {same} "
          f"lossless {lossless} | s {', '.join(f'{k} {v:.2f}' for k, v in med.items())}", flush=True)
geo = lambda v: statistics.geometric_mean(v) if v else float("nan")
print(f"geomean A/B: pred {geo(ratios['pred']):.3f} none {geo(ratios['none']):.3f}")
