"""The peer table on this machine: res-LABEL.json (foretell through ../run-2026-12-01-zen4-heldout2/peer_probe.py, arms
pred and none), res-llamacpp-plain.json, res-llamacpp-ngram.json (one round each). Medians; ratios of wall times;
geomeans over the edits (the tasks whose reply repeats the file).
    python summary.py [LABEL]"""
import json, math, statistics, os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
load = lambda label: json.load(open(os.path.join(HERE, f"res-{label}.json")))
fo = load(sys.argv[1] if len(sys.argv) > 1 else "foretell")
lp, ln = load("llamacpp-plain"), load("llamacpp-ngram")
PROSE = {"explain_go", "review_css", "tests_py", "del_comments", "graph_explain", "openai_doc_ts"}
med = lambda xs: statistics.median(x["t"] for x in xs)
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
rows, edits = [], {"ours": [], "ln": [], "lp": []}
head = "| task | tokens (ours / llama.cpp) | ours + prediction | ours, n-gram lookup | llama.cpp plain | llama.cpp `--spec-default` | vs our n-gram | vs llama.cpp n-gram | vs llama.cpp plain | identical with/without |"
print(head)
print("|---" * (head.count("|") - 1) + "|")
for name, v in fo.items():
    p, n = med(v["pred"]), med(v["none"])
    same = all(x["text"] == v["none"][0]["text"] for x in v["pred"] + v["none"])
    ours = statistics.median(b["t"] / a["t"] for a, b in zip(v["pred"], v["none"]))
    lpt, lnt = med(lp[name]["none"]), med(ln[name]["none"])
    kind = "" if name not in PROSE else " (short/prose)"
    line = (f"| {name}{kind} | {v['pred'][0]['tok']} / {lp[name]['none'][0]['tok']} | {p:.2f} s | {n:.2f} s | {lpt:.2f} s | {lnt:.2f} s | "
            f"{ours:.2f}× | {lnt / p:.2f}× | {lpt / p:.2f}× | {'yes' if same else 'NO'} |")
    print(line)
    if name not in PROSE:
        edits["ours"].append(ours); edits["ln"].append(lnt / p); edits["lp"].append(lpt / p)
    rows.append(ours)
print()
print(f"edits ({len(edits['ours'])}): vs our n-gram {gm(edits['ours']):.3f} (min {min(edits['ours']):.2f}); "
      f"vs llama.cpp n-gram {gm(edits['ln']):.2f} (min {min(edits['ln']):.2f}); vs llama.cpp plain {gm(edits['lp']):.2f} (min {min(edits['lp']):.2f})")
print(f"all {len(rows)} vs our n-gram: {gm(rows):.3f} (min {min(rows):.2f})")
