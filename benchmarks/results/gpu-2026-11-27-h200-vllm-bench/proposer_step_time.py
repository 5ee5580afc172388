# run from the repository root: .venv/bin/python benchmarks/results/gpu-2026-11-27-h200-vllm-bench/proposer_step_time.py
"""DraftBook.step cost per step for one request (and 8 at once), on the H200 run's real outputs."""
import time, sys, json
import numpy as np
from transformers import AutoTokenizer
from foretell.bench.workloads import build_tasks, WorkloadOptions
from foretell.integrations.vllm.proposer import DraftBook, ProposerConfig
from foretell.integrations.vllm.adapter import Row
from foretell.integrations.vllm import XARG_PREDICTION
from foretell.core.tokens import TokenClasses

tok = AutoTokenizer.from_pretrained("/root/.cache/foretell/models/qwen2.5-coder-0.5b-instruct-bf16")
res = {t["name"]: t for t in json.load(open(str(__import__("pathlib").Path(__file__).parent / "results.json")))["tasks"]}
tasks, _ = build_tasks(tok, ["verbatim", "realedit"], WorkloadOptions(max_tokens=256))
tasks = [t for t in tasks if t.name in res]
classes = TokenClasses.from_tokenizer(tok)
K = 32

def simulate(group, reps=3):
    best = None
    for _ in range(reps):
        book = DraftBook(ProposerConfig(k=K, max_model_len=8192, adaptive_k=True), classes)
        rows = [Row(f"r{i}", list(t.prompt_ids), {XARG_PREDICTION: list(t.prediction_ids)}) for i, t in enumerate(group)]
        truth = [tok.encode(res[t.name]["runs"]["plain"]["text"], add_special_tokens=False) for t in group]
        out = [[tr[0]] for tr in truth]
        L = max(len(t.prompt_ids) for t in group) + 400
        ids = np.zeros((len(group), L), dtype=np.int32)
        times, live = [], list(range(len(group)))
        while live:
            rws = [rows[i] for i in live]
            n = np.zeros(len(live), dtype=np.int32)
            sub = np.zeros((len(live), L), dtype=np.int32)
            for j, i in enumerate(live):
                seq = list(group[i].prompt_ids) + out[i]; sub[j, :len(seq)] = seq; n[j] = len(seq)
            t0 = time.perf_counter()
            drafts = book.step(rws, [[1]] * len(live), n, sub)
            times.append(time.perf_counter() - t0)
            for j, i in enumerate(live):
                d = drafts[j]; pos = len(out[i]); acc = 0
                while acc < len(d) and pos + acc < len(truth[i]) and truth[i][pos + acc] == d[acc]: acc += 1
                out[i] += truth[i][pos:pos + acc + 1]
            book.forget_except({rows[i].req_id for i in live})
            live = [i for i in live if len(out[i]) < len(truth[i])]
        if best is None or sum(times) < sum(best):
            best = times
    return best

tot = 0
for t in tasks:
    times = simulate([t])
    tot += sum(times)
    print(f"{t.name:28s} steps {len(times):4d} first {times[0]*1e3:6.2f} ms  later mean {np.mean(times[1:] or [0])*1e3:5.2f} ms  total {sum(times)*1e3:6.1f} ms")
print(f"all single: {tot*1e3:.0f} ms")
group = [tasks[i % len(tasks)] for i in range(8)]
times = simulate(group)
print(f"8 at once: steps {len(times)} first {times[0]*1e3:.1f} ms later mean {np.mean(times[1:])*1e3:.2f} ms total {sum(times)*1e3:.0f} ms")
