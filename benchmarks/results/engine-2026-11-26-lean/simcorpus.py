"""Corpus for policy replays: (group, name, prompt_ids, prediction_ids, output_ids, curve)."""
import json, importlib.util, sys
from importlib import resources
from foretell.core.adaptive_k import CostModel
from foretell.core.tokens import TokenClasses
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions
tok = load_tokenizer(resolve_model("default").path)
classes = TokenClasses.from_tokenizer(tok)
eos = tok.convert_tokens_to_ids("<|im_end|>")
FILES = {"r05": "benchmarks/results/run-2026-11-26-epyc-gguf-blocks/results.json",
         "r15": "benchmarks/results/realedit-1.5b-2026-11-26-epyc-gguf-blocks/results.json"}
def curve_of(path):
    res = json.load(open(path))
    return CostModel({int(k): float(v) for k, v in res['meta']['cost_curve'].items() if int(k) > 1})
C05 = curve_of(FILES["r05"]); C15 = curve_of(FILES["r15"])
def load(groups=("r05", "r15", "held", "rec")):
    items = []
    tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions(max_tokens=384))}
    for g in ("r05", "r15"):
        if g not in groups: continue
        res = json.load(open(FILES[g]))
        for r in res['tasks']:
            if r['suite'] != 'realedit': continue
            t = tasks[r['name']]
            out = list(tok.encode(r['runs']['plain']['text'], add_special_tokens=False)) + [eos]
            items.append((g, r['name'], list(t.prompt_ids), list(t.prediction_ids), out, C05 if g == "r05" else C15))
    if "held" in groups:
        src = open("tmp/heldout.py").read()
        ns = {}
        exec(src.split("def once")[0].replace("c = openai.OpenAI", "c = None #").replace("M = c.models", "M = None #").replace("import json, sys, time, statistics, openai", "import json, sys"), ns)
        for name, path, lang, instr, style in ns["T"]:
            code = open(path).read()
            msgs = ns["messages"](style, lang, code, instr)
            prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            if isinstance(prompt, dict) or hasattr(prompt, "input_ids"): prompt = prompt["input_ids"]
            out = list(tok.encode(open(f"tmp/heldout-{name}.txt").read(), add_special_tokens=False)) + [eos]
            items.append(("held", name, list(prompt), list(tok.encode(code, add_special_tokens=False)), out, C05))
    if "rec" in groups:
        data = json.loads(resources.files("foretell.bench").joinpath("data/recorded_outputs.json").read_text())
        for i, task in enumerate(data["tasks"]):
            prompt = [1, 2, 3] + task["prediction_ids"] + [4]
            items.append(("rec", task.get("name", str(i)), prompt, task["prediction_ids"], task["output_ids"], C05))
    return items
