"""The verify-cost curve t(n)/t(1): how much a forward pass over n new tokens costs against one token.

Measured once per model + dtype + device at start-up (a handful of passes over a sequence with a few hundred
cached tokens) and cached as JSON; the adaptive-k policy uses it to decide how many tokens to propose.

Start-up never fails because of the measurement: the first passes (allocation, kernel selection, page
faults) are run untimed as a warm-up, at least ``MIN_SIZES`` are always measured however slow a pass is, and a
curve that does not validate as a :class:`CostModel` is neither used nor cached (the default curve serves
instead, and the next start measures again). A cached curve that does not validate is ignored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

import torch

from foretell.config import ConfigError
from foretell.core.adaptive_k import CostModel
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import ModelRunner, Segment

log = logging.getLogger("foretell.engine")

# Measured on the 2-core CPU for Qwen2.5-Coder-0.5B bf16 (REFERENCE §4), used when nothing is measured.
DEFAULT_COST_POINTS = {1: 1.0, 2: 1.01, 4: 1.02, 8: 1.03, 16: 1.08, 32: 1.2, 64: 1.52, 128: 2.3, 256: 4.0}
MEASURE_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MIN_SIZES = 4  # always measured (1, 2, 4, 8), however slow: the curve needs points beyond n = 1
MAX_PASS_SECONDS = 1.0  # larger sizes are skipped once a warm pass takes this long (the curve extrapolates)
WARMUP_PASSES = 2  # untimed passes per size before anything is timed


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
    """Seconds of one pass over ``n`` tokens; on a GPU the clock stops only once the kernels finished."""
    tokens = torch.randint(0, vocab, (n,), generator=gen).tolist()
    _synchronize(runner.device)
    start = time.perf_counter()
    runner.forward([Segment(kv, tokens, num_logits=n)])
    _synchronize(runner.device)
    return time.perf_counter() - start


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _affordable_sizes(runner: ModelRunner, kv: SeqKV, vocab: int, gen: torch.Generator) -> list[int]:
    """The sizes worth timing: warm-up passes at each size (the slowest of them is not counted), stopping
    after the first size whose warm pass exceeds ``MAX_PASS_SECONDS`` but never before ``MIN_SIZES``."""
    sizes = []
    for i, n in enumerate(MEASURE_SIZES):
        sizes.append(n)
        warm = min(_timed_pass(runner, kv, n, vocab, gen) for _ in range(WARMUP_PASSES))
        if i + 1 >= MIN_SIZES and warm > MAX_PASS_SECONDS:
            break
    return sizes


def valid_cost_points(points) -> dict[int, float] | None:
    """``points`` as ``{n: ratio}`` when they make a valid :class:`CostModel`, else None."""
    try:
        parsed = {int(n): float(r) for n, r in dict(points).items()}
        CostModel(parsed)
    except (ConfigError, TypeError, ValueError):
        return None
    return parsed


def cached_cost_points(runner: ModelRunner, model_key: str, cache_dir: Path) -> dict[int, float]:
    """Measure once per (model, dtype, device, torch version); later starts read the JSON.

    Always returns valid points: an invalid cache file is ignored (and replaced), an invalid measurement
    falls back to ``DEFAULT_COST_POINTS`` and is not cached, so the next start measures again.
    """
    key = f"v2|{model_key}|{runner.kv_shape.dtype}|{runner.device}|{torch.__version__}|{os.cpu_count()}"
    path = cache_dir / f"cost-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    cached = _read_cached(path)
    if cached is not None:
        return cached
    measured = valid_cost_points(measure_cost_points(runner))
    if measured is None:
        log.warning("the measured verify-cost curve is invalid; using the default curve (measured again next start)")
        return dict(DEFAULT_COST_POINTS)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"key": key, "points": measured}, indent=1))
    tmp.replace(path)  # atomic: a concurrent start never reads half a file
    return measured


def _read_cached(path: Path) -> dict[int, float] | None:
    try:
        points = json.loads(path.read_text())["points"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    valid = valid_cost_points(points)
    if valid is None:
        log.warning("ignoring the invalid cached verify-cost curve %s", path)
    return valid
