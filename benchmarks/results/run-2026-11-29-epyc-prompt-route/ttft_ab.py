"""Time to first token by prompt length: prompt chunks on the kernel up to the measured crossover (the engine's
start-up measurement, cost.cached_prompt_kernel_rows) against the cost curve's old bound (5 rows here), alternating
per request in one process (bench engine: prefix cache off, exact mode, int8 route). Run from the repository root."""
import sys
from foretell.bench.harness import BenchOptions, load_engine, run_engine
from foretell.core.adaptive_k import CostModel
from foretell.config import EngineConfig
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import prompt_kernel_rows

engine, _, _ = load_engine(BenchOptions(suites=("realedit",), dtype="auto"))
measured = engine.pool.kernel_rows
old = prompt_kernel_rows(engine.runner, engine.cost, EngineConfig(exact=True))  # the curve's bound, no measurement
print(f"kernel rows: measured {measured}, the cost curve's bound {old}")
tok = engine.tokenizer
ids = tok.encode(open("src/foretell/bench/data/snake.py").read())


def ttft(n: int, salt: str, rows: int) -> float:
    engine.pool.kernel_rows = rows
    prompt = tok.encode(f"# {salt}\n") + ids[:n]  # a unique first line: nothing cached
    (r,), _ = run_engine(engine, [GenerationRequest(prompt_ids=prompt, max_tokens=1)], "p")
    return r.ttft_s


ttft(16, "warm", old), ttft(16, "warm2", measured)
for n in [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "16,40,80,120,160,240,320").split(",")]:
    t = {old: [], measured: []}
    for i in range(3):
        for rows in ((old, measured) if i % 2 == 0 else (measured, old)):
            t[rows].append(ttft(n, f"{n}-{i}-{rows}", rows))
    a, b = sorted(t[old])[1], sorted(t[measured])[1]
    print(f"prompt {len(tok.encode('# x')) + n + 1:4d} tokens: curve's bound {a * 1e3:7.1f} ms, measured {b * 1e3:7.1f} ms,"
          f" ratio {b / a:.2f}", flush=True)
