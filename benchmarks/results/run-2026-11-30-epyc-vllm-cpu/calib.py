import json, sys, collections, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows: by[r["request"]].append(r)
for req, rs in by.items():
    rs.sort(key=lambda r: r["step"])
    if len(rs) < 5: continue
    buckets = collections.defaultdict(list)
    for a, b in zip(rs, rs[1:]):
        d = (b["t"] - a["t"]) * 1000
        k = b["k"]; kb = 0 if k == 0 else 1 if k <= 4 else 2 if k <= 16 else 3 if k <= 40 else 4
        buckets[kb].append(d / b["cost"])
    print(req[:6], {kb: (len(v), round(statistics.median(v), 1)) for kb, v in sorted(buckets.items())})
