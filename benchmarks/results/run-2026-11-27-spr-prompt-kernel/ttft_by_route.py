"""Time to first token (one output token) by prompt length, exact mode, with a prompt's chunks on the library GEMM
(``KVPool.kernel_rows`` 0, the route before) and on foretell's kernel (the auto choice), alternating in one process;
prefix cache off, as in ``foretell bench``. The prompt is a slice of engine/runner.py's tokens.

Run from the repository root: .venv/bin/python benchmarks/results/run-2026-11-27-spr-prompt-kernel/ttft_by_route.py
"""
import statistics
import sys
import time

from foretell.bench.harness import BenchOptions, load_engine
from foretell.config import SpeculationParams
from foretell.engine.api import GenerationRequest

engine, _, _ = load_engine(BenchOptions(suites=["controls"]))
auto = engine.pool.kernel_rows
print(f"exact {engine.runner.exact}, kernel rows (auto) {auto}")
source = engine.tokenizer(open("src/foretell/engine/runner.py").read())["input_ids"]
sizes = [int(a) for a in sys.argv[1:]] or [1, 8, 32, 64, 128, 256, 384, 511, 1000]
for n in sizes:
    times = {0: [], auto: []}
    for round_ in range(6):
        for rows in (0, auto) if round_ % 2 else (auto, 0):
            engine.pool.kernel_rows = rows
            req = GenerationRequest(prompt_ids=source[:n], max_tokens=1, speculation=SpeculationParams(method="none"))
            start = time.perf_counter()
            engine.generate([req])
            times[rows].append(time.perf_counter() - start)
    lib, ker = statistics.median(times[0]), statistics.median(times[auto])
    print(f"{n:5d} tokens: library {[round(t * 1000) for t in sorted(times[0])]} ms, "
          f"kernel {[round(t * 1000) for t in sorted(times[auto])]} ms, kernel/library {ker / lib:.2f}", flush=True)
