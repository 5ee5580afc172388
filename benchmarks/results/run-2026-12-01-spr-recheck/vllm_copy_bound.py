"""What any drafter could reach over vLLM `ngram` on this run's vLLM cost line: the copy bound of the bench
(foretell.core.simulate.cheapest_copy: a drafter that knows the output and copies runs of the prediction, the
prompt or the output so far, each pass priced on the line), with vLLM's measured time to first token.

The line t(n) = C + B n (n tokens verified in a pass) is fitted by least squares to the measured decode times
of vLLM `ngram` and vLLM + foretell: each run's passes and drafted tokens replayed (vLLM's n-gram rule, and the
plugin's DraftBook as replay.py does) against vLLM plain's output, C and B from
decode_s = C * passes + B * (passes + drafted).

usage: vllm_copy_bound.py MODEL_DIR vllm_partial.jsonl [K=64]"""
import json, math, os, sys
import numpy as np
from transformers import AutoTokenizer
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
from foretell.core.adaptive_k import CostModel
from foretell.core.simulate import cheapest_copy, copy_runs
from foretell.core.tokens import TokenClasses
from foretell.integrations.vllm import XARG_PREDICTION
from foretell.integrations.vllm.adapter import Row
from foretell.integrations.vllm.proposer import DraftBook, ProposerConfig

tok = AutoTokenizer.from_pretrained(sys.argv[1])
rows = {(r["variant"], r["task"]): r for r in map(json.loads, open(sys.argv[2]))}
K = int(sys.argv[3]) if len(sys.argv) > 3 else 64
tasks = realedit_tasks(tok, WorkloadOptions(max_tokens=384))
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")


def ngram_draft(ctx, k=32, nmax=4, nmin=1):
    for n in range(nmax, nmin - 1, -1):
        pat = ctx[-n:]
        for i in range(len(ctx) - n):
            if ctx[i:i + n] == pat:
                return ctx[i + n:i + n + k]
    return []


def passes_and_drafted(task, output, mode, book=None):
    prompt, done, passes, drafted = list(task.prompt_ids), [output[0]], 0, 0
    row = Row("r", prompt, {XARG_PREDICTION: list(task.prediction_ids)}, frozenset({eos}), task.max_tokens)
    while len(done) < len(output):
        if mode == "foretell":
            (draft,) = book.step([row], [[done[-1]]], np.array([len(prompt) + len(done)]), np.array([prompt + done]))
        else:
            draft = ngram_draft(prompt + done)[: max(0, task.max_tokens - len(done) - 1)]
        n = 0
        while n < len(draft) and len(done) + n < len(output) and draft[n] == output[len(done) + n]:
            n += 1
        done += output[len(done):len(done) + n + 1]
        passes, drafted = passes + 1, drafted + len(draft)
    if book is not None:
        book.forget_except(set())
    return passes, drafted


outs, obs = {}, []
book = DraftBook(ProposerConfig(k=K, max_model_len=8192), classes)
for task in tasks:
    plain = rows[("vllm_plain", task.name)]
    out = tok.encode(plain["text"], add_special_tokens=False)
    outs[task.name] = out + [eos] if len(out) < task.max_tokens else out
    for variant, mode in (("vllm_ngram", "ngram"), ("vllm_foretell", "foretell")):
        r = rows[(variant, task.name)]
        p, d = passes_and_drafted(task, outs[task.name], mode, book)
        obs.append((task.name, variant, r["forward_passes"], p, d, r["decode_s"]))
A = np.array([[p, p + d] for _, _, _, p, d, _ in obs], dtype=float)
y = np.array([s for *_, s in obs])
(C, B), *_ = np.linalg.lstsq(A, y, rcond=None)
print(f"line: t(n) = {C * 1e3:.1f} ms + {B * 1e3:.2f} ms * n  (t(1) = {(C + B) * 1e3:.1f} ms; "
      f"t(33)/t(1) = {(C + 33 * B) / (C + B):.2f}, t(65)/t(1) = {(C + 65 * B) / (C + B):.2f})")
for name, variant, measured, p, d, s in obs:
    print(f"  {name:24s} {variant:14s} passes measured {measured:4d} replayed {p:4d}, drafted {d:5d}: "
          f"{s:6.2f} s measured, {C * p + B * (p + d):6.2f} s on the line")
t1 = C + B
cost = CostModel({n: (C + B * n) / t1 for n in (2, 17, 33, 65, 129, 257)})
ratios, ratios4, fore = [], [], []
print(f"\ncopy bound over vLLM ngram (runs capped at K = {K}):")
for task in tasks:
    out = outs[task.name]
    runs = copy_runs([task.prediction_ids, task.prompt_ids], out, K)[1:]
    best, best4 = cheapest_copy(runs, cost, 1), cheapest_copy(runs, cost, 4)
    ngram, ours = rows[("vllm_ngram", task.name)], rows[("vllm_foretell", task.name)]
    ttft = min(ngram["ttft_s"], ours["ttft_s"])
    bound, bound4 = (ngram["wall_s"] / (ttft + b.cost * t1) for b in (best, best4))
    ratios.append(bound)
    ratios4.append(bound4)
    fore.append(ngram["wall_s"] / ours["wall_s"])
    print(f"  {task.name:24s} bound {bound:5.2f}x in {best.passes:3d} passes, runs >= 4 {bound4:5.2f}x in "
          f"{best4.passes:3d}; foretell measured {fore[-1]:5.2f}x")
g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
print(f"geomean: bound {g(ratios):.3f}x, runs >= 4 {g(ratios4):.3f}x, foretell measured {g(fore):.3f}x")
