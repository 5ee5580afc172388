import time
from foretell.bench.harness import BenchOptions, load_engine
from foretell.engine import cost
engine, _, _ = load_engine(BenchOptions(suites=("realedit",), dtype="auto"))
for _ in range(2):
    s = time.perf_counter()
    rows = cost.measure_prompt_kernel_rows(engine.runner, 512)
    print("rows", rows, f"{time.perf_counter() - s:.1f} s", flush=True)
