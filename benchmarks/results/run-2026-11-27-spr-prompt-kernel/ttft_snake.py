"""Time to first token of the bench's snake-verbatim prompt (plain decoding, one output token, prefix cache off),
eight requests in one process; the fastest and the median. Run it with each version's source on PYTHONPATH to
compare versions in alternating processes:
PYTHONPATH=src .venv/bin/python benchmarks/results/run-2026-11-27-spr-prompt-kernel/ttft_snake.py
"""
import statistics
import time

import foretell
from foretell.bench.harness import BenchOptions, load_engine
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.config import SpeculationParams
from foretell.engine.api import GenerationRequest

engine, _, _ = load_engine(BenchOptions(suites=["verbatim"]))
tasks, _ = build_tasks(engine.tokenizer, ["verbatim"], WorkloadOptions())
prompt = next(t for t in tasks if t.name == "snake/verbatim").prompt_ids
times = []
for _ in range(8):
    req = GenerationRequest(prompt_ids=list(prompt), max_tokens=1, speculation=SpeculationParams(method="none"))
    start = time.perf_counter()
    engine.generate([req])
    times.append(time.perf_counter() - start)
print(f"{foretell.__file__}: {len(prompt)} prompt tokens, kernel rows {getattr(engine.pool, 'kernel_rows', 0)}: "
      f"fastest {min(times) * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms")
