"""Microbenchmark: µs per engine step (observe + propose) of the prediction aligner (thread CPU time).

Cases, at 1k, 8k and 32k prediction tokens (random token ids over a code-like vocabulary with repeats):
- aligned: the output copies the prediction; each step accepts a whole draft (k = 64) plus one token;
- realigning: the output is the prediction with random edits (insert / delete / replace / move / duplicate)
  every ~50 tokens; steps follow the standard rule (accept the matching draft prefix, plus one token).
Also the one-off index build (first divergence) for each size. Not a test.

    .venv/bin/python benchmarks/aligner_micro.py
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from foretell.core.aligner import PredictionAligner  # noqa: E402


def make_prediction(n: int, rng: random.Random, vocab: int = 2000) -> list[int]:
    """Code-like ids: a log-uniform vocabulary (id 1, the "newline", ~9% of tokens) with repeated lines."""
    lines: list[list[int]] = []
    out: list[int] = []
    while len(out) < n:
        if lines and rng.random() < 0.2:
            line = rng.choice(lines)  # repeated line
        else:
            line = [int(vocab ** rng.random()) for _ in range(rng.randint(3, 14))] + [1]
            lines.append(line)
        out.extend(line)
    return out[:n]


def make_edited(pred: list[int], rng: random.Random, every: int = 50) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(pred):
        run = rng.randint(every // 2, every * 3 // 2)
        out.extend(pred[i:i + run])
        i += run
        kind = rng.choice(["insert", "delete", "replace", "move", "duplicate"])
        if kind == "insert":
            out.extend(rng.randrange(3000, 4000) for _ in range(rng.randint(1, 10)))
        elif kind == "delete":
            i += rng.randint(1, 10)
        elif kind == "replace":
            out.extend(rng.randrange(3000, 4000) for _ in range(rng.randint(1, 4)))
            i += rng.randint(1, 4)
        elif kind == "move":
            start = rng.randrange(len(pred))
            out.extend(pred[start:start + rng.randint(5, 30)])
        else:
            out.extend(pred[max(0, i - 20):i])
    return out


def run_steps(pred: list[int], output: list[int], k: int = 64) -> tuple[int, float]:
    """(steps, seconds spent inside propose + observe) for the standard rule over ``output``; the index is
    built beforehand (its one-off cost is reported separately)."""
    aligner = PredictionAligner(pred)
    aligner.build_index()
    pos = steps = 0
    spent = 0.0
    clock = time.thread_time  # CPU time of this thread: robust to other processes on a shared machine
    while pos < len(output):
        start = clock()
        draft = aligner.propose(k).tokens
        spent += clock() - start
        hits = 0
        while hits < len(draft) and pos + hits < len(output) and draft[hits] == output[pos + hits]:
            hits += 1
        step = output[pos:pos + hits + 1]
        start = clock()
        aligner.observe(step)
        spent += clock() - start
        pos += hits + 1
        steps += 1
    return steps, spent


def index_build_ms(pred: list[int]) -> float:
    aligner = PredictionAligner(pred)
    start = time.perf_counter()
    aligner.build_index()
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    rng = random.Random(0)
    print("| prediction tokens | case | steps | µs / step | tokens / step | index build (ms) |")
    print("|---|---|---|---|---|---|")
    for n in (1_000, 8_000, 32_000):
        pred = make_prediction(n, rng)
        build = index_build_ms(pred)
        for case, output in (("aligned", pred), ("realigning", make_edited(pred, rng))):
            best = min((run_steps(pred, output) for _ in range(3)), key=lambda r: r[1])
            steps, secs = best
            print(f"| {n:,} | {case} | {steps} | {secs / steps * 1e6:.1f} | {len(output) / steps:.1f} | "
                  f"{build:.1f} |")


if __name__ == "__main__":
    main()
