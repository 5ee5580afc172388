import json, sys, collections, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows: by[r["request"]].append(r)
for req, rs in by.items():
    rs.sort(key=lambda r: r["step"])
    if len(rs) < 20: continue
    d = collections.defaultdict(list); acc = collections.defaultdict(list); ctx = collections.Counter()
    for a, b in zip(rs, rs[1:]):
        d[b["k"]].append((b["t"] - a["t"]) * 1000); acc[b["k"]].append(b["accepted"])
        if b["k"]: ctx[(b["source"], b.get("context"))] += 1
    print(req[:6], len(rs), {k: (len(v), round(statistics.median(v), 1), sum(acc[k])) for k, v in sorted(d.items())}, dict(ctx))
