"""Per request of a vLLM bench run (vllm_partial.jsonl): wall, time to first token, passes and ms per pass after
the first token; and foretell/ngram as measured beside the same ratio with ngram's passes priced at foretell's
ms per pass on the same task. Usage: python per_pass.py run1/bench/vllm_partial.jsonl"""
import json
import math
import sys

rows: dict[str, dict[str, dict]] = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows.setdefault(r["task"], {})[r["mode"]] = r


def ms_per_pass(r):
    return r["decode_s"] * 1e3 / max(1, r["forward_passes"] - 1)


print(f"{'task':30s} {'mode':9s} {'wall ms':>8s} {'ttft ms':>8s} {'passes':>6s} {'ms/pass':>8s}")
for task, modes in rows.items():
    for mode, r in modes.items():
        print(f"{task:30s} {mode:9s} {r['wall_s'] * 1e3:8.0f} {r['ttft_s'] * 1e3:8.0f} {r['forward_passes']:6d} "
              f"{ms_per_pass(r):8.1f}")

edits = []
print()
for task, modes in rows.items():
    if task.startswith("concurrent") or not {"ngram", "foretell"} <= modes.keys():
        continue
    n, f = modes["ngram"], modes["foretell"]
    measured = n["wall_s"] / f["wall_s"]
    priced = (n["ttft_s"] + (n["forward_passes"] - 1) * ms_per_pass(f) / 1e3) / f["wall_s"]
    print(f"{task:30s} foretell/ngram measured {measured:.2f}x, ngram's passes at foretell's ms/pass {priced:.2f}x")
    if task.startswith("realedit"):
        edits.append((measured, priced))
if edits:
    def gm(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs))
    print(f"real edits: geomean measured {gm([a for a, _ in edits]):.2f}x, priced {gm([b for _, b in edits]):.2f}x "
          f"(min {min(b for _, b in edits):.2f}x)")
