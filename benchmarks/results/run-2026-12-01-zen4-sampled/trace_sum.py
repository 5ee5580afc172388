"""Per request of a --trace file: passes, summed cost (curve units), wall between its first and last step, ms a
unit, drafted/accepted, and the same split by pass size (rows = k + 1)."""
import json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in recs: by[r["request"]].append(r)
for rid, rs in by.items():
    if len(rs) < 3: continue  # the warm-up requests
    rs.sort(key=lambda r: r["step"])
    d = [(b["t"] - a["t"], b) for a, b in zip(rs, rs[1:])]  # time from the step before to this step
    cost = sum(b["cost"] for _, b in d); wall = sum(x for x, _ in d)
    k = sum(b["k"] for _, b in d); acc = sum(b["accepted"] for _, b in d)
    srcs = collections.Counter(b["source"] for _, b in d)
    big = [(x, b) for x, b in d if b["k"] >= 16]; small = [(x, b) for x, b in d if b["k"] < 16]
    f = lambda xs: f"{len(xs)} passes {1e3*sum(x for x,_ in xs)/max(1e-9,sum(b['cost'] for _,b in xs)):.1f} ms/unit" if xs else "-"
    print(f"{rid[:6]} passes {len(d)+1} wall {wall:.2f}s cost {cost:.1f} -> {1e3*wall/cost:.1f} ms/unit; drafted {k} acc {acc}; {dict(srcs)} | k>=16: {f(big)} | k<16: {f(small)}")
