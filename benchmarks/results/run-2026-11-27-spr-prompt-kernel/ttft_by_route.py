"""Time to first token (one output token) by prompt length, exact mode, by the route of a prompt's chunks:
``library`` (``KVPool.kernel_rows`` 0, the route before), ``last`` (only the last, partial chunk on foretell's
kernel: ``prefill_chunk - 1``) and ``every`` (every chunk on the kernel: ``prefill_chunk``), alternating in one
process (the order rotates each round); prefix cache off, as in ``foretell bench``. The prompt is a slice of
engine/runner.py's tokens.

Run from the repository root:
.venv/bin/python benchmarks/results/run-2026-11-27-spr-prompt-kernel/ttft_by_route.py [--rounds N] [SIZE ...]
"""
import argparse
import statistics
import time

from foretell.bench.harness import BenchOptions, load_engine
from foretell.config import SpeculationParams
from foretell.engine.api import GenerationRequest

parser = argparse.ArgumentParser()
parser.add_argument("sizes", nargs="*", type=int, default=[1, 8, 32, 64, 128, 256, 384, 511, 1000, 2000])
parser.add_argument("--rounds", type=int, default=6)
args = parser.parse_args()
engine, _, _ = load_engine(BenchOptions(suites=["controls"]))
chunk = engine.config.prefill_chunk
print(f"exact {engine.runner.exact}, kernel rows (auto) {engine.pool.kernel_rows}, prefill chunk {chunk}")
routes = {"library": 0, "last": chunk - 1, "every": chunk}
source = engine.tokenizer(open("src/foretell/engine/runner.py").read())["input_ids"]
for n in args.sizes:
    times = {name: [] for name in routes}
    names = list(routes)
    for round_ in range(args.rounds):
        for name in names[round_ % 3:] + names[: round_ % 3]:
            engine.pool.kernel_rows = routes[name]
            req = GenerationRequest(prompt_ids=source[:n], max_tokens=1, speculation=SpeculationParams(method="none"))
            start = time.perf_counter()
            engine.generate([req])
            times[name].append(time.perf_counter() - start)
    lib = statistics.median(times["library"])
    print(f"{n:5d} tokens: " + ", ".join(
        f"{name} {round(statistics.median(ts) * 1000)} ms ({statistics.median(ts) / lib:.2f}x)"
        for name, ts in times.items()), flush=True)
