"""Time DraftBook.step for a batch of 8 rows (the real edits' prompts and vLLM replies), each accepting its drafts as
far as they match its reply: milliseconds of proposing per step, the GPU concern (12-20 ms passes)."""
import json, sys, time
import numpy as np
from transformers import AutoTokenizer
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
from foretell.core.tokens import TokenClasses
from foretell.integrations.vllm import XARG_PREDICTION
from foretell.integrations.vllm.adapter import Row
from foretell.integrations.vllm.proposer import DraftBook, ProposerConfig, GPU_COST_POINTS

tok = AutoTokenizer.from_pretrained(sys.argv[1])
partial = {(r["variant"], r["task"]): r for r in map(json.loads, open(sys.argv[2]))}
tasks = realedit_tasks(tok, WorkloadOptions(max_tokens=384))[:8]
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
outs = [tok.encode(partial[("vllm_plain", t.name)]["text"], add_special_tokens=False) + [eos] for t in tasks]
book = DraftBook(ProposerConfig(k=64, max_model_len=8192, cost_points=dict(GPU_COST_POINTS)), classes)
rows = [Row(f"r{i}", list(t.prompt_ids), {XARG_PREDICTION: list(t.prediction_ids)}, frozenset({eos}), t.max_tokens)
        for i, t in enumerate(tasks)]
done = [[o[0]] for o in outs]
last = [[o[0]] for o in outs]
times, steps = [], 0
width = max(len(r.prompt_ids) for r in rows) + 400
while True:
    live = [i for i in range(8) if len(done[i]) < len(outs[i])]
    if not live:
        break
    ids = np.zeros((len(live), width), dtype=np.int64)
    ntok = np.zeros(len(live), dtype=np.int64)
    for j, i in enumerate(live):
        seq = rows[i].prompt_ids + done[i]
        ids[j, :len(seq)] = seq
        ntok[j] = len(seq)
    t0 = time.perf_counter()
    drafts = book.step([rows[i] for i in live], [last[i] for i in live], ntok, ids)
    times.append(time.perf_counter() - t0)
    for j, i in enumerate(live):
        d, o, n = drafts[j], outs[i], 0
        while n < len(d) and len(done[i]) + n < len(o) and d[n] == o[len(done[i]) + n]:
            n += 1
        new = o[len(done[i]):len(done[i]) + n + 1]
        done[i] += new
        last[i] = new
    steps += 1
    book.forget_except({rows[i].req_id for i in range(8) if len(done[i]) < len(outs[i])})
t = np.array(times) * 1e3
print(f"{steps} steps; propose ms per step: median {np.median(t):.2f}, mean {t.mean():.2f}, p90 {np.percentile(t, 90):.2f}, max {t.max():.2f}")
