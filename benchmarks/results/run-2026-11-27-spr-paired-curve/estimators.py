import json, sys, math, statistics as st
rounds = [{int(k): v for k, v in r.items()} for r in json.load(open(sys.argv[1]))]
sizes = [n for n in rounds[0] if n > 1]
truth = {n: st.median(r[n][1] / r[n][0] for r in rounds) for n in sizes}
mean_truth = {n: sum(r[n][1] for r in rounds) / sum(r[n][0] for r in rounds) for n in sizes}
print("truth (median paired):", {n: round(v, 2) for n, v in truth.items()})
print("truth (ratio of means):", {n: round(v, 2) for n, v in mean_truth.items()})
def est_min(win):  # current: per-size min over rounds, n=1 min over rounds
    one = min(r[n][0] for r in win for n in (1,))
    return {n: min(r[n][1] for r in win) / one for n in sizes}
def est_paired_median(win):
    return {n: st.median(r[n][1] / r[n][0] for r in win) for n in sizes}
def est_paired_min(win):
    return {n: min(r[n][1] for r in win) / min(r[n][0] for r in win) for n in sizes}
for W in (4, 6):
    for name, f in (("min/min(1)", est_min), ("paired median", est_paired_median), ("min/min(adjacent)", est_paired_min)):
        errs = {n: [] for n in sizes}
        for s in range(0, len(rounds) - W + 1):
            e = f(rounds[s:s + W])
            for n in sizes:
                errs[n].append(math.log(e[n] / truth[n]))
        print(f"W={W} {name:18s}", " ".join(f"{n}:{st.mean(errs[n]):+.2f}/{max(map(abs, errs[n])):.2f}" for n in sizes))
