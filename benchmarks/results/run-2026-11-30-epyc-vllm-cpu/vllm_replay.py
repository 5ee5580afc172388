"""Replay vLLM realedit outputs offline: foretell's DraftBook policy (vLLM proposer) vs vLLM's ngram (K=32, n 1..4).
python vllm_replay.py PARTIAL.jsonl task [c33]
Environment (2026-11-30, twelfth session): NGRAM_K (vLLM ngram's K, default 32), FORETELL_K (the plugin's, default 32)."""
import sys, json
import numpy as np
from pathlib import Path
from transformers import AutoTokenizer
from foretell.bench import workloads as W
from foretell.config import SpeculationParams
from foretell.core.prediction import make_proposer
from foretell.core.policy import DraftPolicy
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.integrations.vllm.proposer import RequestDrafts
from foretell.paths import cache_dir
mdir = next((cache_dir() / "models").glob("qwen2.5-coder-0.5b*"))
tok = AutoTokenizer.from_pretrained(mdir)
runs = [json.loads(l) for l in open(sys.argv[1])]
task = sys.argv[2]; c33 = 3.6
K = int(__import__("os").environ.get("NGRAM_K", "32"))
KF = int(__import__("os").environ.get("FORETELL_K", "32"))
cost = CostModel(json.loads(sys.argv[3])) if len(sys.argv) > 3 and sys.argv[3].startswith("{") else CostModel({n: 1 + (c33 - 1) * (n - 1) / 32 for n in (1, 2, 4, 8, 16, 33, 64, 129, 257)})
kind = task.split("/")[1]
f, instr = {k: (f, i) for f, k, i in W.REALEDIT_TASKS}[kind]
code = (W.DATA_DIR / "realedit" / f).read_text()
prompt = W.chat_prompt_ids(tok, W.file_prompt(instr, code, W.REPLY_RULE, W.FENCE_LANGUAGE[Path(f).suffix]))
pred = W.encode(tok, code)
text = next(r["text"] for r in runs if r["task"] == task and r["variant"] == "vllm_plain")
out = list(W.encode(tok, text)) + [tok.convert_tokens_to_ids("<|im_end|>")]
def vllm_ngram(ctx, k):
    arr = ctx
    for n in range(4, 0, -1):
        if len(arr) <= n: continue
        suf = arr[-n:]
        for i in range(len(arr) - n):  # earliest match
            if arr[i:i + n] == suf:
                return arr[i + n:i + n + k]
    return []
def sim(kind):
    pos, passes, t = 0, 0, 0.0
    classes = TokenClasses.from_tokenizer(tok)
    st = None
    if kind == "foretell":
        spec = SpeculationParams(prediction=tuple(pred))
        st = RequestDrafts(DraftPolicy(make_proposer(prompt, spec, classes), cost, True, trees=False, stop_ids=[out[-1]]))
    ks = []
    while pos < len(out):
        if kind == "foretell":
            d = list(st.propose(min(KF, len(out) - pos), 0, 0.0).draft.tokens)
        else:
            d = vllm_ngram(prompt + out[:pos], K)
        acc = 0
        while acc < len(d) and pos + acc < len(out) and d[acc] == out[pos + acc]: acc += 1
        new = out[pos:pos + acc + 1]
        if st: st.observe(new)
        passes += 1; t += cost.ratio(1 + len(d)); ks.append((len(d), acc))
        pos += len(new)
    return passes, t, ks
a, b = sim("foretell"), sim("ngram")
print(task, "tokens", len(out), "foretell passes", a[0], "cost %.1f" % a[1], "| ngram passes", b[0], "cost %.1f" % b[1], "ratio %.2f" % (b[1] / a[1]))
if len(sys.argv) > 4:
    print("foretell", a[2]); print("ngram", b[2])
