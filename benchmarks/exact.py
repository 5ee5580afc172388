"""Exact mode's cost and effect, default mode beside it in one process (interleaved, same machine state).

1. Pass times: a forward pass over n new tokens after ``--context`` cached ones (n = 1 is a decode step,
   n > 1 a verify pass or a prompt chunk), the fastest of ``--rounds``, in each mode.
2. The real-edit workload (``foretell bench``'s ``realedit`` tasks: the file in the prompt and as the
   prediction), greedy: plain decoding, n-gram lookup alone, and the prediction, in each mode; wall times and
   whether each output is token-identical to plain decoding *in the same mode*.

    flock /tmp/foretell-heavy.lock .venv/bin/python benchmarks/exact.py --max-tokens 448

Writes ``<out>/exact.json`` and ``<out>/exact.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import Segment

MODES = ("default", "exact")
METHODS = ("plain", "ngram", "prediction")


def pass_times(engines: dict, sizes: list[int], context: int, rounds: int) -> dict[str, dict[int, float]]:
    best = {mode: {n: float("inf") for n in sizes} for mode in engines}
    kvs = {}
    for mode, engine in engines.items():
        runner = engine.runner
        kv = SeqKV(runner.kv_shape, context + max(sizes), context + max(sizes))
        gen = torch.Generator().manual_seed(0)
        runner.forward([Segment(kv, torch.randint(0, runner.vocab_size, (context,), generator=gen).tolist(), 1)])
        kv.length = context
        kvs[mode] = (kv, gen)
    for _ in range(rounds + 1):  # the first round warms up
        for n in sizes:
            for mode, engine in engines.items():
                kv, gen = kvs[mode]
                seconds, _shapes = _timed_pass(engine.runner, kv, n, engine.runner.vocab_size, gen)
                if _ > 0:
                    best[mode][n] = min(best[mode][n], seconds)
    return best


def generate(engine: LLMEngine, task, method: str) -> dict:
    prediction = task.prediction_ids if method == "prediction" else None
    spec = SpeculationParams(prediction=prediction, method="none" if method == "plain" else "auto")
    req = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=task.max_tokens,
                            sampling=SamplingParams(temperature=0.0), speculation=spec)
    start = time.perf_counter()
    chunks = engine.generate([req])[req.request_id]
    return {"seconds": time.perf_counter() - start, "tokens": [t for c in chunks for t in c.new_token_ids],
            "passes": chunks[-1].stats.forward_passes}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--max-tokens", type=int, default=448)
    p.add_argument("--limit", type=int, default=None, help="at most N real-edit tasks")
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default="benchmarks/results/exact")
    args = p.parse_args(argv)
    from foretell.bench.workloads import WorkloadOptions, realedit_tasks

    engines = {}
    for mode in MODES:
        config = EngineConfig(model=args.model, dtype=args.dtype, exact=mode == "exact", prefix_cache=False)
        engines[mode], name = LLMEngine.from_config(config)
    dtype = str(engines["exact"].runner.kv_shape.dtype).removeprefix("torch.")
    sizes = [1, 8, 32, 64, 128, 512]
    times = pass_times(engines, sizes, args.context, args.rounds)
    tasks = realedit_tasks(engines["default"].tokenizer, WorkloadOptions(max_tokens=args.max_tokens, limit=args.limit))
    runs: dict[str, dict[str, dict[str, dict]]] = {}
    for task in tasks:
        runs[task.name] = {mode: {} for mode in MODES}
        for method in METHODS:
            for mode in MODES:  # interleaved: both modes see the same machine state
                runs[task.name][mode][method] = generate(engines[mode], task, method)
        row = runs[task.name]
        print(task.name, {m: {k: round(v["seconds"], 1) for k, v in row[m].items()} for m in MODES}, flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"model": name, "dtype": dtype, "cpu": _cpu(), "threads": torch.get_num_threads(),
            "load_average": os.getloadavg(), "argv": argv, "context": args.context}
    result = {"meta": meta, "pass_seconds": times,
              "tasks": {t: {m: {k: {"seconds": v["seconds"], "passes": v["passes"], "tokens": len(v["tokens"]),
                                    "identical": v["tokens"] == row[m]["plain"]["tokens"]}
                                for k, v in row[m].items()} for m in MODES} for t, row in runs.items()}}
    (out / "exact.json").write_text(json.dumps(result, indent=1) + "\n")
    text = report(result)
    (out / "exact.md").write_text(text)
    print(text)


def report(result: dict) -> str:
    meta, times, tasks = result["meta"], result["pass_seconds"], result["tasks"]
    lines = [f"Exact mode vs default, {meta['model']}, {meta['dtype']}, {meta['cpu']}, {meta['threads']} threads, "
             f"load average at the end {meta['load_average'][0]:.2f}.", "",
             f"Forward pass over n new tokens after {meta['context']} cached (fastest of the rounds):", "",
             "| n | default ms | exact ms | exact / default |", "|---|---|---|---|"]
    for n in times["default"]:
        d, e = times["default"][n], times["exact"][n]
        lines.append(f"| {n} | {1e3 * d:.1f} | {1e3 * e:.1f} | {e / d:.2f}× |")
    lines += ["", "Real-edit tasks, greedy, wall seconds (passes); identical = same tokens as plain decoding in the "
              "same mode:", "",
              "| task | plain default | plain exact | n-gram default | n-gram exact | prediction default | "
              "prediction exact | identical default (n-gram, pred.) | identical exact (n-gram, pred.) |",
              "|---|---|---|---|---|---|---|---|---|"]
    ratios = {m: [] for m in METHODS}
    differ = {mode: 0 for mode in MODES}
    for name, row in tasks.items():
        cells = []
        for method in METHODS:
            for mode in MODES:
                r = row[mode][method]
                cells.append(f"{r['seconds']:.1f} ({r['passes']})")
            ratios[method].append(row["exact"][method]["seconds"] / row["default"][method]["seconds"])
        ident = []
        for mode in MODES:
            flags = [row[mode][m]["identical"] for m in ("ngram", "prediction")]
            differ[mode] += flags.count(False)
            ident.append(", ".join("yes" if f else "**no**" for f in flags))
        lines.append(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ident) + " |")
    geo = {m: statistics.geometric_mean(v) for m, v in ratios.items() if v}
    lines += ["", "Exact / default wall time, geometric mean over the tasks: "
              + ", ".join(f"{m} {g:.2f}×" for m, g in geo.items())
              + f". Outputs differing from plain decoding in the same mode: default {differ['default']}, "
              f"exact {differ['exact']} (of {2 * len(tasks)}).", ""]
    return "\n".join(lines)


def _cpu() -> str:
    from foretell.bench.harness import machine_info

    info = machine_info()
    return f"{info['cpu']} ×{info['cores']}"


if __name__ == "__main__":
    main()
