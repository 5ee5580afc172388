"""Time to first token of the snake-verbatim control prompt with no prediction, a garbage one, an empty one and
the file's first half, four rounds alternating (ABCD DCBA ...), a few output tokens each (default 4).

Run from the repository root: .venv/bin/python benchmarks/results/run-2026-11-27-spr-proposer-index/ttft_by_prediction.py
"""
import sys

from foretell.bench.harness import BenchOptions, load_engine, request_for, run_engine
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.config import SpeculationParams

engine, _, _ = load_engine(BenchOptions(suites=["controls"]))
tasks, _ = build_tasks(engine.tokenizer, ["controls"], WorkloadOptions())
by_name = {t.name: t for t in tasks if t.name.startswith("controls/snake-verbatim")}
max_tokens = int(sys.argv[1]) if sys.argv[1:] else 4
results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in by_name}
for round_ in range(4):
    for name in list(by_name)[:: -1 if round_ % 2 else 1]:
        task = by_name[name]
        spec = SpeculationParams(prediction=task.prediction_ids, method="auto")
        (out,), wall = run_engine(engine, [request_for(task, spec, max_tokens=max_tokens)], name)
        results[name].append((out.ttft_s, wall, out.forward_passes))
for name, runs in results.items():
    print(f"{name:40s} ttft {[round(r[0], 3) for r in runs]} wall {[round(r[1], 3) for r in runs]} "
          f"passes {[r[2] for r in runs]}")
