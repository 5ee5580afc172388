"""Recorded outputs for replays: real edits (0.5B and 1.5B runs, several machines) and held-out-like requests."""
import json, glob, os, sys
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions
HELD = "benchmarks/results/run-2026-11-28-spr-heldout"
sys.path.insert(0, HELD)
from tasks import tasks as held_tasks, prompt as held_prompt, prediction_text
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
PANELS = CostModel({2: 1.08, 3: 1.19, 4: 1.19, 8: 1.72, 16: 2.56, 17: 2.64, 32: 3.93, 33: 4.42, 48: 5.83, 49: 5.83, 64: 7.43, 65: 7.98, 96: 11.02, 97: 11.02, 128: 14.84, 129: 14.84, 256: 28.54})
stairs = json.load(open("benchmarks/results/run-2026-11-28-spr-stairs/bench/results.json"))
SPR = CostModel({int(n): float(r) for n, r in stairs["meta"]["cost_curve"].items() if int(n) > 1})
FILES = {"spr05": "benchmarks/results/run-2026-11-26-spr/results.json",
         "spr15": "benchmarks/results/realedit-1.5b-2026-11-26-spr/results.json",
         "epyc05": "benchmarks/results/run-2026-11-26-epyc-lean/results.json",
         "epyc15": "benchmarks/results/realedit-1.5b-2026-11-26-epyc-lean/results.json",
         "stairs05": "benchmarks/results/run-2026-11-28-spr-stairs/bench/results.json",
         "cur15": "benchmarks/results/run-2026-11-28-spr-1.5b-current/realedit-1.5b/results.json"}
def load(curve=PANELS):
    tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
    items = []
    for g, path in FILES.items():
        res = json.load(open(path))
        for r in res['tasks']:
            if r['suite'] != 'realedit': continue
            t = tasks[r['name']]
            out = list(tok.encode(r['runs']['plain']['text'], add_special_tokens=False)) + [eos]
            items.append((g, r['name'], list(t.prompt_ids), list(t.prediction_ids), out, curve))
    texts = {}
    for f in sorted(glob.glob(os.path.join(HELD, "res-*.json"))) + ["benchmarks/results/run-2026-11-28-cascadelake-panels/res-ab-1795906866.json"]:
        d = json.load(open(f))
        for name, v in d.items():
            if not isinstance(v, dict): continue
            for key in ("none", "Anone"):
                if v.get(key) and v[key][0].get("text"):
                    texts.setdefault(name, set()).add(v[key][0]["text"])
    for name, (instr, f, style) in held_tasks.items():
        for j, text in enumerate(sorted(texts.get(name, ()))):
            ids = tok.apply_chat_template([{"role": "user", "content": held_prompt(instr, f, style)}], add_generation_prompt=True, tokenize=True)
            ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
            out = list(tok.encode(text, add_special_tokens=False)) + [eos]
            pred = list(tok.encode(prediction_text(f, style), add_special_tokens=False))
            items.append((f"held{j}", name, ids, pred, out, curve))
    return items
