import json, sys
from collections import Counter
d = json.load(open(sys.argv[1]))
for arm, runs in d.items():
    recs = runs[0]
    c = Counter(); k = Counter(); acc = Counter(); rows = 0
    for x in recs:
        ctx = x.get("context", "none") if x["k"] else "none"
        c[ctx] += 1; k[ctx] += x["k"]; acc[ctx] += x["accepted"]; rows += 1 + x["k"] + x.get("branch", {}).get("k", 0)
    print(arm, "steps", len(recs), "rows", rows)
    for ctx in c: print(f"   {ctx:26s} steps {c[ctx]:4d} drafted {k[ctx]:5d} accepted {acc[ctx]:5d}")
