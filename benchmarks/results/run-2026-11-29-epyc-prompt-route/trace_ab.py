"""A/B with per-step trace: n-gram lookup vs the prediction on chosen tasks, alternating, N rounds."""
import sys, time, json, statistics
from collections import Counter
from foretell.bench.harness import BenchOptions, load_engine, run_engine, request_for, NGRAM_SPEC, foretell_spec, select_tasks
from foretell.bench.workloads import build_tasks, WorkloadOptions

names = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
opts = BenchOptions(suites=("realedit", "controls"), dtype="auto")
engine, _, _ = load_engine(opts)
tok = engine.tokenizer
tasks = select_tasks(build_tasks(tok, ("realedit", "controls"), WorkloadOptions())[0], tuple(names))
print([t.name for t in tasks])
run_engine(engine, [request_for(tasks[0], NGRAM_SPEC, 4)], "warm")
for task in tasks:
    res = {"ngram": [], "pred": []}
    for r in range(rounds):
        order = [("ngram", NGRAM_SPEC), ("pred", foretell_spec(task))]
        for name, spec in (order[::-1] if r % 2 else order):
            recs = []
            engine.trace = recs.append
            (out,), _ = run_engine(engine, [request_for(task, spec)], name)
            engine.trace = None
            ts = [x["t"] for x in recs]
            dts = [b - a for a, b in zip([0.0] + ts[:-1], ts)]
            rows = [1 + x["k"] + (x.get("branch", {}).get("k", 0)) for x in recs]
            res[name].append((out.wall_s, out.ttft_s, out.forward_passes, sum(rows), recs, dts))
            print(f"{task.name} {name} r{r}: wall {out.wall_s:.2f} ttft {out.ttft_s:.2f} passes {out.forward_passes} rows {sum(rows)} trees {sum('branch' in x for x in recs)}", flush=True)
    for name in res:
        w = [x[0] for x in res[name]]
        print(f"== {task.name} {name}: wall med {statistics.median(w):.2f} min {min(w):.2f} max {max(w):.2f}")
    json.dump({n: [x[4] for x in v] for n, v in res.items()}, open(f"tmp/trace_{task.name.replace('/', '_')}.json", "w"))
