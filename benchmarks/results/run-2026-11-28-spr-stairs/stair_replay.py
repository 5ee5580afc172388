"""Replay the draft policy on recorded outputs, every pass priced on the measured staircase curve (SPR, 0.5B, 300
keys, this session), the policy deciding on (A) the curve interpolated from the start-up sizes or (B) the curve
with the tile boundaries (16m, 16m + 1) measured too."""
import collections, json, math, sys, numpy as np
from foretell.config import SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.core.simulate import _common_prefix
from foretell.core.tokens import TokenClasses
from foretell.bench.workloads import WorkloadOptions, longfile_tasks, realedit_tasks
from foretell.models.loader import load_tokenizer, resolve_model

# the recorded outputs (plain decoding's text) of earlier bench runs: real edits and long files, 0.5B and 1.5B
RUNS = {"0.5B SPR": "benchmarks/results/run-2026-11-28-spr-gqa-attention/bench/results.json",
        "0.5B SPR amx": "benchmarks/results/run-2026-11-27-spr-amx/results.json",
        "1.5B SPR": "benchmarks/results/realedit-1.5b-2026-11-27-spr-amx/results.json",
        "0.5B EPYC": "benchmarks/results/run-2026-11-26-epyc-lean/results.json",
        "1.5B EPYC": "benchmarks/results/realedit-1.5b-2026-11-26-epyc-lean/results.json",
        "0.5B long": "benchmarks/results/longfile-0.5b-2026-11-27-spr-exact/results.json",
        "0.5B long2": "benchmarks/results/run-2026-11-28-spr-amx-wide/longfile/results.json",
        "0.5B SPR glue": "benchmarks/results/run-2026-11-28-spr-layer-glue/bench2/results.json"}
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions()) + longfile_tasks(tok, WorkloadOptions())}
CASES = []
for group, path in RUNS.items():
    for r in json.load(open(path))["tasks"]:
        if r["suite"] in ("realedit", "longfile"):
            out = list(tok.encode(r["runs"]["plain"]["text"], add_special_tokens=False)) + [eos]
            CASES.append((group, r["name"], None, tasks[r["name"]], out))

TRUE = {1: 1.0, 2: 1.03, 3: 1.06, 4: 1.07, 8: 1.07, 15: 1.10, 16: 1.14, 17: 1.40, 20: 1.43, 24: 1.45, 32: 1.53,
        33: 1.83, 48: 1.97, 49: 2.47, 64: 2.6, 65: 3.0, 80: 3.06, 81: 3.25, 96: 3.38, 97: 3.65, 112: 3.71,
        113: 4.1, 128: 4.26, 129: 4.84, 256: 7.26}
true = CostModel({n: r for n, r in TRUE.items() if n > 1})
interp = CostModel({n: TRUE[n] for n in (2, 3, 4, 8, 16, 32, 64, 128, 256)})
stairs = CostModel({n: TRUE[n] for n in (2, 3, 4, 8, 16, 17, 32, 33, 48, 49, 64, 65, 80, 81, 96, 97, 112, 113, 128, 129, 256)})

def simulate(policy, output, k_max=128):
    pos = passes = 0
    cost = 0.0
    while pos < len(output):
        room = min(k_max, len(output) - pos - 1)
        d = policy.decide(room)
        hits = _common_prefix(d.draft.tokens, output, pos) if d.draft is not None and d.draft.tokens else 0
        emitted = output[pos:pos + hits + 1]
        policy.record(d, emitted)
        policy.proposer.observe(emitted)
        passes += 1
        cost += true.ratio((len(d.draft) if d.draft is not None else 0) + 1)
        pos += len(emitted)
    return passes, cost

res = collections.defaultdict(dict)
seen = set()
for group, name, _, task, out in CASES:
    if (name, len(out)) in seen: continue
    seen.add((name, len(out)))
    for cname, curve in (("interp", interp), ("stairs", stairs)):
        for method in ("ngram", "pred"):
            spec = SpeculationParams(prediction=task.prediction_ids) if method == "pred" else SpeculationParams()
            p = DraftPolicy(make_proposer(task.prompt_ids, spec, classes), curve, stop_ids={eos}, trees=False)
            res[(group, name)][(cname, method)] = simulate(p, out)
logs = collections.defaultdict(list)
for key, r in res.items():
    for cname in ("interp", "stairs"):
        logs[f"{cname}: pred vs ngram, same curve"].append(math.log(r[(cname, "ngram")][1] / r[(cname, "pred")][1]))
    logs["stairs/interp pred cost"].append(math.log(r[("stairs", "pred")][1] / r[("interp", "pred")][1]))
    logs["stairs/interp ngram cost"].append(math.log(r[("stairs", "ngram")][1] / r[("interp", "ngram")][1]))
    print(key, {f"{c}/{m}": (p, round(cst, 1)) for (c, m), (p, cst) in r.items()}, flush=True)
for k, v in logs.items():
    print(f"{k:32s} geomean {math.exp(np.mean(v)):.4f} min {math.exp(min(v)):.3f} max {math.exp(max(v)):.3f} n={len(v)}")
