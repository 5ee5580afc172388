"""Seeded runs (the same reply with and without the prediction): per task the medians' ratio none / pred, whether
every reply's text is the same, and the geomean over the edits (the 16 of run-2026-12-01-zen4-heldout2) and all."""
import json, sys, math, statistics
res = json.load(open(sys.argv[1]))
PROSE = {"explain_go", "review_css", "tests_py", "graph_explain", "openai_doc_ts", "fnm_docs"}  # not file-back edits
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
rows = {}
for name, arms in res.items():
    tp, tn = (statistics.median(x["t"] for x in arms[a]) for a in ("pred", "none"))
    same = len({x["text"] for a in arms for x in arms[a]}) == 1
    rows[name] = tn / tp
    print(f"{name:14s} pred {tp:6.2f} s none {tn:6.2f} s  none/pred {tn/tp:.3f}  {arms['pred'][0]['tok']:5d} tok  {'same' if same else 'DIFFERENT'}")
edits = [v for k, v in rows.items() if k not in PROSE]
print(f"edits ({len(edits)}) geomean {g(edits):.3f} min {min(edits):.3f} | all ({len(rows)}) geomean {g(list(rows.values())):.3f} min {min(rows.values()):.3f}")
