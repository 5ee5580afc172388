"""Per-step wall time by draft size: plain vs n-gram vs prediction arms, alternating, on chosen tasks."""
import sys, time, json, statistics
from foretell.bench.harness import BenchOptions, load_engine, run_engine, request_for, NGRAM_SPEC, PLAIN_SPEC, foretell_spec, select_tasks
from foretell.bench.workloads import build_tasks, WorkloadOptions

names = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
opts = BenchOptions(suites=("realedit", "controls"), dtype="auto")
engine, _, _ = load_engine(opts)
tasks = select_tasks(build_tasks(engine.tokenizer, ("realedit", "controls"), WorkloadOptions())[0], tuple(names))
run_engine(engine, [request_for(tasks[0], NGRAM_SPEC, 4)], "warm")
for task in tasks:
    res = {}
    last = {}
    arms = [("plain", PLAIN_SPEC), ("ngram", NGRAM_SPEC), ("pred", foretell_spec(task))]
    for r in range(rounds):
        for name, spec in (arms[::-1] if r % 2 else arms):
            recs = []
            engine.trace = recs.append
            (out,), _ = run_engine(engine, [request_for(task, spec)], name)
            engine.trace = None
            last[name] = recs
            ts = [x["t"] for x in recs]
            byk = {}
            for x, dt in zip(recs[1:], [b - a for a, b in zip(ts[:-1], ts[1:])]):
                kk = x["k"] + x.get("branch", {}).get("k", 0)
                byk.setdefault(min(kk, 4), []).append(dt * 1000)
            res.setdefault(name, []).append(out.wall_s)
            print(f"{task.name} {name} r{r}: wall {out.wall_s:.2f} ttft {out.ttft_s:.2f} passes {out.forward_passes} tokens {len(out.token_ids) if hasattr(out,'token_ids') else '?'} "
                  + " ".join(f"k{k}:{len(v)}x{statistics.median(v):.1f}ms" for k, v in sorted(byk.items())), flush=True)
    for name, w in res.items():
        print(f"== {task.name} {name}: wall med {statistics.median(w):.2f} min {min(w):.2f}", flush=True)
    if len(sys.argv) > 3:
        json.dump(last, open(sys.argv[3], "w"))
