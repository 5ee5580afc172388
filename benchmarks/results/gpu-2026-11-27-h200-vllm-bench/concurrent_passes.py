# run from the repository root: .venv/bin/python benchmarks/results/gpu-2026-11-27-h200-vllm-bench/concurrent_passes.py
"""Passes per request for requests decoding together (DraftBook, calibration off), under the CPU reference curve,
the embedded engine's curve measured on the H200, and GPU_COST_POINTS, on the H200 run's real outputs."""
import numpy as np
exec(open(__import__("pathlib").Path(__file__).parent / "proposer_step_time.py").read().split("tot = 0")[0])
from foretell.integrations.vllm.proposer import REFERENCE_COST_POINTS, GPU_COST_POINTS
h200 = {2: 1.2137, 8: 1.2137, 9: 1.3081, 11: 1.39, 24: 1.4172, 32: 1.4913, 256: 1.4913}
gpu = GPU_COST_POINTS
import itertools
groups = {"8 real outputs": [tasks[i % len(tasks)] for i in range(8)], "8 copies (verbatim x8)": [tasks[0]] * 8,
          "4 real": tasks[2:6]}
for gname, group in groups.items():
    for cname, pts in (("reference", REFERENCE_COST_POINTS), ("h200-embedded", h200), ("gpu-flat", gpu)):
        book = DraftBook(ProposerConfig(k=32, max_model_len=8192, adaptive_k=True, calibrate=False, cost_points=pts), classes)
        rows = [Row(f"r{i}", list(t.prompt_ids), {XARG_PREDICTION: list(t.prediction_ids)}) for i, t in enumerate(group)]
        truth = [tok.encode(res[t.name]["runs"]["plain"]["text"], add_special_tokens=False) for t in group]
        out = [[tr[0]] for tr in truth]; L = max(len(t.prompt_ids) for t in group) + 400
        live = list(range(len(group))); steps = 0; drafted = 0; per_req = [0] * len(group)
        while live:
            sub = np.zeros((len(live), L), dtype=np.int32); n = np.zeros(len(live), dtype=np.int32)
            for j, i in enumerate(live):
                seq = list(group[i].prompt_ids) + out[i]; sub[j, :len(seq)] = seq; n[j] = len(seq)
            drafts = book.step([rows[i] for i in live], [[1]] * len(live), n, sub); steps += 1
            for j, i in enumerate(live):
                d = drafts[j]; pos = len(out[i]); acc = 0; drafted += len(d); per_req[i] += 1
                while acc < len(d) and pos + acc < len(truth[i]) and truth[i][pos + acc] == d[acc]: acc += 1
                out[i] += truth[i][pos:pos + acc + 1]
            live = [i for i in live if len(out[i]) < len(truth[i])]
        print(f"{gname:24s} {cname:14s} steps {steps:4d}  passes per request {sorted(per_req)}  drafted {drafted}")
