"""Replay the 9 real edits' vLLM outputs in bench order through one DraftBook-like policy state whose cost curve
is calibrated from simulated pass times (vLLM CPU line: 0.268 s + 19 ms/token, +-3% noise).
python replay_seq.py PARTIAL MODE   MODE: old (CostCalibrator from the reference curve), flat (LineCalibrator
from the reference curve), new (LineCalibrator from CPU_COST_POINTS), oracle (policy knows the line)."""
import sys, json, os
import numpy as np
from pathlib import Path
from transformers import AutoTokenizer
from foretell.bench import workloads as W
from foretell.config import SpeculationParams
from foretell.core.prediction import make_proposer
from foretell.core.policy import DraftPolicy
from foretell.core.adaptive_k import CostModel, CostCalibrator, LineCalibrator
from foretell.core.tokens import TokenClasses
from foretell.integrations.vllm.proposer import RequestDrafts, CPU_COST_POINTS
from foretell.paths import cache_dir
mdir = next((cache_dir() / "models").glob("qwen2.5-coder-0.5b*"))
tok = AutoTokenizer.from_pretrained(mdir)
classes = TokenClasses.from_tokenizer(tok)
runs = [json.loads(l) for l in open(sys.argv[1])]
mode = sys.argv[2]
KF = int(os.environ.get("FORETELL_K", "64"))
REF = {1: 1.0, 2: 1.01, 4: 1.02, 8: 1.03, 16: 1.08, 32: 1.2, 64: 1.52, 128: 2.3, 256: 4.0}
sec = lambda n: 0.268 + 0.019 * n
true = CostModel({n: sec(n) / sec(1) for n in (2, 4, 8, 16, 33, 65, 129, 257)})
rng = np.random.default_rng(int(os.environ.get("SEED", "0")))
if mode == "old": cal, cost = CostCalibrator(REF), CostModel(REF)
elif mode == "flat": cal, cost = LineCalibrator(REF), CostModel(REF)
elif mode == "new": cal, cost = LineCalibrator(CPU_COST_POINTS), CostModel(CPU_COST_POINTS)
else: cal, cost = None, true
tasks = os.environ.get("TASKS", "type_hints bug_fix rename port docstrings json_edit markdown_edit sql_edit js_edit").split()
tot = {}
for t in tasks:
    f, instr = {k: (f, i) for f, k, i in W.REALEDIT_TASKS}[t]
    code = (W.DATA_DIR / "realedit" / f).read_text()
    prompt = W.chat_prompt_ids(tok, W.file_prompt(instr, code, W.REPLY_RULE, W.FENCE_LANGUAGE[Path(f).suffix]))
    pred = W.encode(tok, code)
    text = next(r["text"] for r in runs if r["task"] == "realedit/" + t and r["variant"] == "vllm_plain")
    out = list(W.encode(tok, text)) + [tok.convert_tokens_to_ids("<|im_end|>")]
    st = RequestDrafts(DraftPolicy(make_proposer(prompt, SpeculationParams(prediction=tuple(pred)), classes), cost, True, trees=False, stop_ids=[out[-1]]))
    pos = passes = 0; secs = 0.0; prop = 0
    while pos < len(out):
        d = list(st.propose(min(KF, len(out) - pos), 0, 0.0).draft.tokens)
        acc = 0
        while acc < len(d) and pos + acc < len(out) and d[acc] == out[pos + acc]: acc += 1
        new = out[pos:pos + acc + 1]
        st.observe(new)
        s = sec(1 + len(d)) * (1 + 0.03 * rng.standard_normal())
        passes += 1; secs += s; prop += len(d)
        if cal is not None and passes > 1:
            c = cal.observe(1 + len(d), s)
            if c is not None: cost = c; st.policy.cost = c
        pos += len(new)
    tot[t] = secs
    print(f"{t:14s} passes {passes:4d} proposed {prop:5d} decode {secs:6.1f} s  ratio64 now {cost.ratio(65):.2f}")
print("total", round(sum(tot.values()), 1), json.dumps({k: round(v, 2) for k, v in tot.items()}))
