"""The verify-cost curve t(n)/t(1): how much a forward pass over n new tokens costs against one token.

Measured once per model + dtype + device at start-up (a handful of passes over a sequence with a few hundred
cached tokens) and cached as JSON; the adaptive-k policy uses it to decide how many tokens to propose.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import torch

from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import ModelRunner, Segment

# Measured on the 2-core CPU for Qwen2.5-Coder-0.5B bf16 (REFERENCE §4), used when nothing is measured.
DEFAULT_COST_POINTS = {1: 1.0, 2: 1.01, 4: 1.02, 8: 1.03, 16: 1.08, 32: 1.2, 64: 1.52, 128: 2.3, 256: 4.0}
MEASURE_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MAX_PASS_SECONDS = 1.0  # larger sizes are skipped once a pass takes this long (the curve extrapolates)


def measure_cost_points(runner: ModelRunner, context: int = 256, rounds: int = 4) -> dict[int, float]:
    """Wall time of a pass over n new tokens after ``context`` cached ones, relative to n = 1.

    Sizes are interleaved in rounds and the fastest pass of each size is kept: other work on the machine only
    ever adds time, so the minimum is the robust estimate (a median taken under load can be off by ×7).
    """
    top = max(MEASURE_SIZES)
    kv = SeqKV(runner.kv_shape, capacity=context + top, max_capacity=context + top)
    gen = torch.Generator().manual_seed(0)
    vocab = runner.vocab_size
    runner.forward([Segment(kv, torch.randint(0, vocab, (context,), generator=gen).tolist(), num_logits=1)])
    kv.length = context
    sizes = _affordable_sizes(runner, kv, vocab, gen)  # warm-up round, stops at slow sizes
    best = {n: float("inf") for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            best[n] = min(best[n], _timed_pass(runner, kv, n, vocab, gen))
    points, prev = {}, 1.0
    for n in sizes:  # non-decreasing, and never above n: n single passes do the same work
        prev = min(max(prev, best[n] / best[1]), float(n))
        points[n] = round(prev, 4)
    return points


def _timed_pass(runner: ModelRunner, kv: SeqKV, n: int, vocab: int, gen: torch.Generator) -> float:
    tokens = torch.randint(0, vocab, (n,), generator=gen).tolist()
    start = time.perf_counter()
    runner.forward([Segment(kv, tokens, num_logits=n)])
    return time.perf_counter() - start


def _affordable_sizes(runner: ModelRunner, kv: SeqKV, vocab: int, gen: torch.Generator) -> list[int]:
    sizes = []
    for n in MEASURE_SIZES:
        sizes.append(n)
        if _timed_pass(runner, kv, n, vocab, gen) > MAX_PASS_SECONDS:
            break
    return sizes


def cached_cost_points(runner: ModelRunner, model_key: str, cache_dir: Path) -> dict[int, float]:
    """Measure once per (model, dtype, device, torch version); later starts read the JSON."""
    key = f"v2|{model_key}|{runner.kv_shape.dtype}|{runner.device}|{torch.__version__}|{os.cpu_count()}"
    path = cache_dir / f"cost-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if path.exists():
        try:
            return {int(k): float(v) for k, v in json.loads(path.read_text())["points"].items()}
        except (ValueError, KeyError):
            pass
    points = measure_cost_points(runner)
    cache_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "points": points}, indent=1))
    return points
