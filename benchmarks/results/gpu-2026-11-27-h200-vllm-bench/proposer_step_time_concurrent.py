"""Time DraftBook.step (the vLLM proposer's per-step work) for the bench's 8 concurrent requests."""
import time, cProfile, pstats, sys
import numpy as np
from transformers import AutoTokenizer
from foretell.bench.workloads import verbatim_tasks, edit_tasks, WorkloadOptions
from foretell.integrations.vllm.proposer import DraftBook, ProposerConfig
from foretell.integrations.vllm.adapter import Row
from foretell.integrations.vllm import XARG_PREDICTION
from foretell.core.tokens import TokenClasses

tok = AutoTokenizer.from_pretrained("/root/.cache/foretell/models/qwen2.5-coder-0.5b-instruct-bf16")
opts = WorkloadOptions(max_tokens=256)
tasks = verbatim_tasks(tok, opts) + edit_tasks(tok, opts)
tasks = [tasks[i % len(tasks)] for i in range(8)]
CLASSES = TokenClasses.from_tokenizer(tok)
K = int(sys.argv[1]) if len(sys.argv) > 1 else 32
def run(profile=False):
    book = DraftBook(ProposerConfig(k=K, max_model_len=8192, adaptive_k=True), CLASSES)
    rows = [Row(f"r{i}", list(t.prompt_ids), {XARG_PREDICTION: list(t.prediction_ids)}) for i, t in enumerate(tasks)]
    truth = [list(t.prediction_ids)[:256] for t in tasks]
    out = [[truth[i][0]] for i in range(8)]
    L = max(len(t.prompt_ids) for t in tasks) + 600
    times = []
    steps = 0
    while any(len(o) < len(truth[i]) for i, o in enumerate(out)):
        ids = np.zeros((8, L), dtype=np.int32)
        n = np.zeros(8, dtype=np.int32)
        for i, t in enumerate(tasks):
            seq = list(t.prompt_ids) + out[i]
            ids[i, :len(seq)] = seq; n[i] = len(seq)
        t0 = time.perf_counter()
        drafts = book.step(rows, [[1]] * 8, n, ids)
        times.append(time.perf_counter() - t0)
        steps += 1
        for i, d in enumerate(drafts):
            pos = len(out[i]); acc = 0
            for j, x in enumerate(d):
                if pos + j < len(truth[i]) and truth[i][pos + j] == x: acc += 1
                else: break
            out[i] += truth[i][pos:pos + acc + 1]
    return times, steps
cold, cold_steps = run()  # a fresh process: the first requests' first step pays for Python's first calls too
print(f"K={K} cold: steps {cold_steps}; first step {cold[0]*1e3:.1f} ms; later steps mean {np.mean(cold[1:])*1e3:.2f} ms; "
      f"total {sum(cold)*1e3:.0f} ms")
times, steps = run()
print(f"K={K} steps {steps}; first step {times[0]*1e3:.1f} ms; later steps mean {np.mean(times[1:])*1e3:.2f} ms, max {np.max(times[1:])*1e3:.1f} ms; total {sum(times)*1e3:.0f} ms")
pr = cProfile.Profile(); pr.enable(); run(); pr.disable()
pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
