"""Per task and arm: seconds per completion token over the rounds (sampled replies differ, so only rates compare)."""
import json, sys, math
res = json.load(open(sys.argv[1]))
tot = {}
rat = []
for name, arms in res.items():
    r = {}
    for arm, xs in arms.items():
        t = sum(x["t"] for x in xs); n = sum(x["tok"] for x in xs)
        r[arm] = (t, n); tot.setdefault(arm, [0, 0]); tot[arm][0] += t; tot[arm][1] += n
        passes = [((x["extra"].get("foretell") or {}).get("forward_passes")) for x in xs]
    ms = {a: 1e3 * t / n for a, (t, n) in r.items()}
    rat.append(ms["none"] / ms["pred"])
    print(f"{name:14s} " + " | ".join(f"{a} {ms[a]:5.2f} ms/tok ({r[a][1]} tok)" for a in r) + f" | none/pred {rat[-1]:.2f}")
print("all: " + " | ".join(f"{a} {1e3*t/n:.2f} ms/tok over {n} tok" for a, (t, n) in tot.items()),
      f"| geomean none/pred per task {math.exp(sum(map(math.log, rat))/len(rat)):.3f}")
