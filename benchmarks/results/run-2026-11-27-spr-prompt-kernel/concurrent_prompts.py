"""Concurrent requests' time to first token when their prompts share the step's prefill budget (every chunk on the
kernel: ``KVPool.kernel_rows`` = ``prefill_chunk``) against waiting for a step with room for a whole chunk (the
last chunk only on the kernel: ``prefill_chunk - 1``; for prompts under 513 tokens the rows run on the kernel
either way). N requests with distinct prompts of P tokens arrive together, 40 output tokens each, plain decoding;
alternating in one process, prefix cache off. Prints each setting's mean time to first token and wall time.

"share the budget" needs the patch that was measured and not kept (NOTES.md: in ``LLMEngine._prompt_chunk``,
``if not self.runner.exact or self.pool.kernel_rows >= self.config.prefill_chunk: return min(pending, budget)``);
on the code as committed both settings wait for room.

Run from the repository root:
.venv/bin/python benchmarks/results/run-2026-11-27-spr-prompt-kernel/concurrent_prompts.py [N] [P] [ROUNDS]
"""
import statistics
import sys
import time

from foretell.bench.harness import BenchOptions, load_engine
from foretell.config import SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest

n, length, rounds = (int(a) for a in (sys.argv[1:] + ["4", "300", "4"][len(sys.argv) - 1 :])[:3])
engine, _, _ = load_engine(BenchOptions(suites=["controls"]))
chunk = engine.config.prefill_chunk
source = engine.tokenizer(open("src/foretell/engine/runner.py").read())["input_ids"]
prompts = [source[i * length : (i + 1) * length] for i in range(n)]
settings = {"share the budget": chunk, "wait for room": chunk - 1}
results: dict[str, list[tuple[float, float]]] = {name: [] for name in settings}
for round_ in range(rounds):
    for name in list(settings)[:: -1 if round_ % 2 else 1]:
        engine.pool.kernel_rows = settings[name]
        reqs = [GenerationRequest(prompt_ids=p, max_tokens=40, ignore_eos=True, sampling=SamplingParams(temperature=0.0),
                                  speculation=SpeculationParams(method="none")) for p in prompts]
        start = time.perf_counter()
        outs = engine.generate(reqs)
        wall = time.perf_counter() - start
        ttft = statistics.mean(chunks[-1].stats.ttft_s for chunks in outs.values())
        results[name].append((ttft, wall))
for name, runs in results.items():
    print(f"{n} x {length}-token prompts, {name:16s}: mean time to first token "
          f"{[round(t, 2) for t, _ in runs]} s, wall {[round(w, 2) for _, w in runs]} s")
