"""Summaries of foretell's per-step trace (`foretell serve --trace FILE`), one line per request:
    python traces.py sum FILE [REQUEST_PREFIX]   steps, tokens drafted and accepted, sources, time, summed cost
                                                 (with a request prefix: that request step by step)
    python traces.py calib FILE                  milliseconds per unit of the cost curve, by draft size
    python traces.py steps FILE                  median step time by draft size, and the drafting contexts
A record is written after its pass, so a step's time is its record's t less the one before it."""
import json, sys, collections, statistics


def requests(path):
    by = collections.defaultdict(list)
    for line in open(path):
        r = json.loads(line)
        by[r["request"]].append(r)
    for req, rs in by.items():
        rs.sort(key=lambda r: r["step"])
        yield req, rs, [((b["t"] - a["t"]) * 1000, b) for a, b in zip(rs, rs[1:])]


def summary(path, show=None):
    for req, rs, timed in requests(path):
        src = collections.Counter(r["source"] for r in rs)
        print(req[:6], "steps", len(rs), "emitted", sum(r["emitted"] for r in rs), "drafted", sum(r["k"] for r in rs),
              "accepted", sum(r["accepted"] for r in rs), "srcs", dict(src), "time %.2f" % (rs[-1]["t"] - rs[0]["t"]),
              "sum cost %.1f" % sum(r["cost"] for r in rs[1:]))
        if show and req.startswith(show):
            for ms, r in timed:
                print(f'{r["step"]:5} {r["source"]:10} k={r["k"]:3} acc={r["accepted"]:3} em={r["emitted"]:3} '
                      f'cost={r["cost"]:6.2f} exp={r["expected"]:6.2f} ms={ms:6.0f} {r.get("context", "")} {r.get("aligner", {})}')


def calib(path):
    for req, rs, timed in requests(path):
        if len(rs) < 5:
            continue
        buckets = collections.defaultdict(list)
        for ms, r in timed:
            k = r["k"]
            buckets[0 if k == 0 else 1 if k <= 4 else 2 if k <= 16 else 3 if k <= 40 else 4].append(ms / r["cost"])
        print(req[:6], "k 0 / 1-4 / 5-16 / 17-40 / 41+: (steps, ms a unit)",
              {b: (len(v), round(statistics.median(v), 1)) for b, v in sorted(buckets.items())})


def steps(path):
    for req, rs, timed in requests(path):
        if len(rs) < 20:
            continue
        ms, acc, ctx = collections.defaultdict(list), collections.Counter(), collections.Counter()
        for t, r in timed:
            ms[r["k"]].append(t)
            acc[r["k"]] += r["accepted"]
            if r["k"]:
                ctx[(r["source"], r.get("context"))] += 1
        print(req[:6], len(rs), "k: (steps, median ms, accepted)",
              {k: (len(v), round(statistics.median(v), 1), acc[k]) for k, v in sorted(ms.items())}, dict(ctx))


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    {"sum": lambda: summary(path, sys.argv[3] if len(sys.argv) > 3 else None),
     "calib": lambda: calib(path), "steps": lambda: steps(path)}[mode]()
