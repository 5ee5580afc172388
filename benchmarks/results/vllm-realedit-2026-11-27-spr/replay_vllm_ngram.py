import json, math, sys
import numpy as np
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench import workloads as W
import foretell.core.prediction as prediction
import foretell.core.simulate as sim
from foretell.core.policy import DraftPolicy, PRIORS
from foretell.config import SpeculationParams
from foretell.integrations.vllm.proposer import REFERENCE_COST_POINTS
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
res = json.load(open(sys.argv[1]))
tasks = {t.name: t for t in W.realedit_tasks(tok, W.WorkloadOptions(max_tokens=384))}
spr = CostModel({int(k): float(v) for k, v in res["meta"]["cost_curve"].items() if int(k) > 1})
flat = CostModel({k: v for k, v in REFERENCE_COST_POINTS.items() if k > 1})
def vllm_ngram_passes(prompt, out, k=32, lo=1, hi=4):
    ctx = list(prompt); pos = passes = 0
    while pos < len(out):
        best_n, best_i = 0, -1
        for n in range(hi, lo - 1, -1):
            suf = ctx[-n:]
            for i in range(len(ctx) - n):  # earliest occurrence
                if ctx[i:i + n] == suf:
                    best_n, best_i = n, i; break
            if best_n: break
        draft = ctx[best_i + best_n: best_i + best_n + min(k, len(out) - pos - 1)] if best_n else []
        hits = 0
        while hits < len(draft) and draft[hits] == out[pos + hits]: hits += 1
        emitted = out[pos:pos + hits + 1]; ctx += emitted; pos += len(emitted); passes += 1
    return passes
for t in res["vllm_engine"]["tasks"]:
    task = tasks[t["name"]]
    text = t["runs"]["foretell"]["text"]
    out = list(tok.encode(text, add_special_tokens=False))
    if len(out) < task.max_tokens: out.append(eos)
    row = [t["name"][9:21].ljust(12), "real", t["runs"]["ngram"]["forward_passes"], t["runs"]["foretell"]["forward_passes"], "| emu-vllm-ngram", vllm_ngram_passes(list(task.prompt_ids), out)]
    for cname, curve in (("flat", flat), ("spr", spr)):
        for m in ("ngram", "auto"):
            spec = SpeculationParams(prediction=list(task.prediction_ids) if m == "auto" else None, method=m)
            p = DraftPolicy(prediction.make_proposer(list(task.prompt_ids), spec, classes), curve, stop_ids={eos}, trees=False)
            r = sim.simulate_policy(p, out, k_max=32)
            row += [f"{cname}-{m}", r.passes]
    print(*row)
