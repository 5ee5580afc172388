import json, math, statistics, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.defaultdict(list)
hashes = collections.defaultdict(set)
for r in rows:
    by[(r["task"], r["curve"], r["method"])].append(r)
    hashes[r["task"]].add(r["hash"])
tasks = list(dict.fromkeys(r["task"] for r in rows))
logs = collections.defaultdict(list)
print(f"{'task':24s} {'ngram old':>9s} {'ngram st':>9s} {'pred old':>9s} {'pred st':>9s} | st/old ngram  st/old pred | pred/ngram old  stairs | passes po/ps/no/ns")
for t in tasks:
    med = {}
    for c in ("old", "stairs"):
        for m in ("ngram", "prediction"):
            med[(c, m)] = statistics.median(x["wall"] for x in by[(t, c, m)])
    def pas(c, m): return statistics.median(x["passes"] for x in by[(t, c, m)])
    a = med[("stairs", "ngram")] / med[("old", "ngram")]; b = med[("stairs", "prediction")] / med[("old", "prediction")]
    c_ = med[("old", "ngram")] / med[("old", "prediction")]; d = med[("stairs", "ngram")] / med[("stairs", "prediction")]
    logs["st/old ngram"].append(math.log(a)); logs["st/old pred"].append(math.log(b)); logs["vs ngram old"].append(math.log(c_)); logs["vs ngram stairs"].append(math.log(d))
    print(f"{t:24s} {med[('old','ngram')]:9.2f} {med[('stairs','ngram')]:9.2f} {med[('old','prediction')]:9.2f} {med[('stairs','prediction')]:9.2f} | {a:12.3f} {b:12.3f} | {c_:14.3f} {d:7.3f} | {pas('old','prediction')}/{pas('stairs','prediction')}/{pas('old','ngram')}/{pas('stairs','ngram')} same={len(hashes[t]) == 1}")
for k, v in logs.items():
    print(f"{k}: geomean {math.exp(statistics.mean(v)):.3f} min {math.exp(min(v)):.3f} max {math.exp(max(v)):.3f}")
