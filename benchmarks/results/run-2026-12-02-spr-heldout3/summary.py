"""The table of this folder: res-foretell.json (arms pred and none, medians over the rounds; ratio = the median of the
per-round ratios none/pred), and, where present, res-llamacpp-plain.json and res-llamacpp-ngram.json (arm none, one
round): llama.cpp's wall time over foretell's with the prediction. Geomeans over the edits (PROSE left out).
    python summary.py"""
import json, math, statistics, os, importlib.util
HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("t3", os.path.join(HERE, "tasks.py")); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
def load(label):
    p = os.path.join(HERE, f"res-{label}.json")
    return json.load(open(p)) if os.path.exists(p) else None
fo, lp, ln = load("foretell"), load("llamacpp-plain"), load("llamacpp-ngram")
med = lambda xs: statistics.median(x["t"] for x in xs)
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
head = "| task | tokens | with the prediction | n-gram lookup (same server) | ratio | accepted / rejected prediction tokens | identical |"
if lp: head += " llama.cpp plain | llama.cpp `--spec-default` | vs llama.cpp plain | vs llama.cpp n-gram |"
print(head); print("|---" * (head.count("|") - 1) + "|")
cols = {"ours": [], "lp": [], "ln": []}
for name, v in fo.items():
    p, n = med(v["pred"]), med(v["none"])
    ratio = statistics.median(b["t"] / a["t"] for a, b in zip(v["pred"], v["none"]))
    same = all(x["text"] == v["none"][0]["text"] for x in v["pred"] + v["none"])
    kind = " (prose)" if name in m.PROSE else ""
    line = f"| {name}{kind} | {v['pred'][0]['tok']} | {p:.2f} s | {n:.2f} s | {ratio:.2f}× | {v['pred'][0]['accepted']} / {v['pred'][0]['rejected']} | {'yes' if same else 'NO'} |"
    if lp:
        a, b = med(lp[name]["none"]), med(ln[name]["none"])
        line += f" {a:.2f} s | {b:.2f} s | {a / p:.2f}× | {b / p:.2f}× |"
        if name not in m.PROSE: cols["lp"].append(a / p); cols["ln"].append(b / p)
    if name not in m.PROSE: cols["ours"].append(ratio)
    print(line)
print()
out = f"edits ({len(cols['ours'])}): {gm(cols['ours']):.3f}× n-gram lookup (min {min(cols['ours']):.2f}×)"
if lp: out += f"; {gm(cols['lp']):.2f}× llama.cpp plain (min {min(cols['lp']):.2f}×); {gm(cols['ln']):.2f}× llama.cpp n-gram (min {min(cols['ln']):.2f}×)"
print(out)
