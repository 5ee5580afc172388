"""The verify-cost curve t(n)/t(1): how much a forward pass over n new tokens costs against one token.

Measured once per model + dtype + device at start-up (a handful of passes over a sequence with a few hundred
cached tokens) and cached as JSON; the adaptive-k policy uses it to decide how many tokens to propose.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from pathlib import Path

import torch

from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import ModelRunner, Segment

# Measured on the 2-core CPU for Qwen2.5-Coder-0.5B bf16 (REFERENCE §4), used when nothing is measured.
DEFAULT_COST_POINTS = {1: 1.0, 2: 1.01, 4: 1.02, 8: 1.03, 16: 1.08, 32: 1.2, 64: 1.52, 128: 2.3, 256: 4.0}
MEASURE_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def measure_cost_points(runner: ModelRunner, context: int = 256, repeats: int = 3) -> dict[int, float]:
    """Median wall time of a pass over n new tokens after ``context`` cached ones, relative to n = 1."""
    kv = SeqKV(runner.kv_shape, capacity=context + max(MEASURE_SIZES), max_capacity=context + max(MEASURE_SIZES))
    gen = torch.Generator().manual_seed(0)
    vocab = runner.vocab_size
    prompt = torch.randint(0, vocab, (context,), generator=gen).tolist()
    runner.forward([Segment(kv, prompt, num_logits=1)])
    kv.length = context
    times = {}
    for n in MEASURE_SIZES:
        tokens = torch.randint(0, vocab, (n,), generator=gen).tolist()
        samples = []
        for _ in range(repeats + 1):  # first run warms up
            start = time.perf_counter()
            runner.forward([Segment(kv, tokens, num_logits=n)])
            samples.append(time.perf_counter() - start)
        times[n] = statistics.median(samples[1:])
    base = times[1]
    points, prev = {}, 1.0
    for n in MEASURE_SIZES:  # keep the curve non-decreasing (timing noise)
        prev = max(prev, times[n] / base)
        points[n] = round(prev, 4)
    return points


def cached_cost_points(runner: ModelRunner, model_key: str, cache_dir: Path) -> dict[int, float]:
    """Measure once per (model, dtype, device, torch version); later starts read the JSON."""
    key = f"{model_key}|{runner.kv_shape.dtype}|{runner.device}|{torch.__version__}|{os.cpu_count()}"
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
