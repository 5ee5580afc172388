import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows: by[r["request"]].append(r)
for req, rs in by.items():
    rs.sort(key=lambda r: r["step"])
    ks = [r["k"] for r in rs]; acc = [r["accepted"] for r in rs]; em = [r["emitted"] for r in rs]
    src = collections.Counter(r["source"] for r in rs)
    dt = [b["t"] - a["t"] for a, b in zip(rs, rs[1:])]
    print(req[:6], "steps", len(rs), "emitted", sum(em), "drafted", sum(ks), "accepted", sum(acc), "srcs", dict(src), "time %.2f" % (rs[-1]["t"] - rs[0]["t"]), "sum cost %.1f" % sum(r["cost"] for r in rs[1:]))
    if len(sys.argv) > 2 and req.startswith(sys.argv[2]):
        for r, d in zip(rs, dt + [0]):
            print(f'{r["step"]:5} {r["source"]:10} k={r["k"]:3} acc={r["accepted"]:3} em={r["emitted"]:3} cost={r["cost"]:6.2f} exp={r["expected"]:6.2f} dt={d*1000:6.0f} {r.get("context","")} {r.get("aligner",{})}')
