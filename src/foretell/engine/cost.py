"""The verify-cost curve t(n)/t(1): how much a forward pass over n new tokens costs against one token.

Measured once per model + dtype + device at start-up (a handful of passes over a sequence with a few hundred
cached tokens) and cached as JSON; the adaptive-k policy uses it to decide how many tokens to propose.

Start-up never fails because of the measurement: the first passes (allocation, kernel selection, page
faults) are run untimed as a warm-up, at least ``MIN_SIZES`` are always measured however slow a pass is, and a
curve that does not validate as a :class:`CostModel` is neither used nor cached (the default curve serves
instead, and the next start measures again). A cached curve that does not validate is ignored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from foretell.config import ConfigError
from foretell.core.adaptive_k import AttentionCost, CostCalibrator, CostModel  # noqa: F401 - CostCalibrator: re-exported
from foretell.engine import cpu_gemm
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import KernelPlan, ModelRunner, Segment, Shape

log = logging.getLogger("foretell.engine")

# Measured on the 2-core CPU for Qwen2.5-Coder-0.5B bf16 (REFERENCE §4), used when nothing is measured.
DEFAULT_COST_POINTS = {1: 1.0, 2: 1.01, 4: 1.02, 8: 1.03, 16: 1.08, 32: 1.2, 64: 1.52, 128: 2.3, 256: 4.0}
# 3 is measured because a two-token draft is what edits verify most, and where the CPU's GEMM changes kernel
# at 4 rows, interpolating 2..4 put it at 1.32x one token against the 1.14x measured (0.5B, fp32, Xeon).
# 16m + 1 beside 16m: foretell's AMX kernels compute 16 rows a tile, so a pass costs a step more at 17, 33, 49 … rows
# (the 0.5B after 300 keys, Sapphire Rapids: 16 rows 1.14x one token, 17 rows 1.40x, 32 rows 1.53x, 33 rows 1.83x);
# interpolating 16..32 priced a 20-token pass at 1.21x against 1.43x measured.
MEASURE_SIZES = (1, 2, 3, 4, 8, 16, 17, 32, 33, 48, 49, 64, 65, 96, 97, 128, 129, 256)
MIN_SIZES = 5  # always measured (1, 2, 3, 4, 8), however slow: the curve needs points beyond n = 1
MAX_PASS_SECONDS = 1.0  # larger sizes are skipped once a warm pass takes this long (the curve extrapolates)
WARMUP_PASSES = 2  # untimed passes per size before anything is timed
MAX_SPREAD = 1.25  # a curve whose paired ratios of one size varied more (median over sizes) is not cached
REFERENCE_CONTEXT = 256  # the curve is measured after this many cached keys
FAR_KEYS = 1536  # and the attention's share after this many more
ATTENTION_SIZES = (1, 8, 16, 32, 64)  # the pass sizes timed at both contexts (those the curve measured)
PROMPT_ROUTE_SIZES = (16, 32, 64, 128, 256, 384)  # prompt chunk rows timed on the kernel and on the library GEMM
PROMPT_ROUTE_CLOSE = 0.15  # two routes within this share of each other are timed once more


def measure_cost_points(runner: ModelRunner, context: int = REFERENCE_CONTEXT, rounds: int = 4,
                        spread: dict[int, float] | None = None, plan: KernelPlan | None = None) -> dict[int, float]:
    """Wall time of a pass over n new tokens after ``context`` cached ones, relative to n = 1.

    Sizes are interleaved in rounds, and in each round every pass of n tokens is timed right after a one-token
    pass: the ratio of the pair is one sample, and a size's point is the median of its samples. The machine's
    speed drifts (a 2-core VM ran the same matmul 2.5x slower within a minute, and its long passes alternate
    between two speeds), so the fastest pass of each size can come from different moments: over 24 rounds on
    a Sapphire Rapids VM (0.5B, bf16) the fastest-pass ratios of 4 rounds were off by up to 0.57 in log
    (64 tokens priced 2.3x one token against 3.1x; the policy then drafted 63 tokens where 127 pay better),
    the median of 4 paired ratios by at most 0.14 (``benchmarks/results/run-2026-11-27-spr-paired-curve/NOTES.md``).
    ``spread``, when given, receives each size's largest / smallest paired ratio (how busy the machine was). With a
    ``plan`` (fp32 CPU linears with two kernels), every pass is timed with each kernel, every layer call in
    it too, and the plan keeps per layer shape and size the faster kernel; then the plan's own passes are
    timed, and the curve is theirs.
    """
    top = max(MEASURE_SIZES)
    kv = SeqKV(runner.kv_shape, capacity=context + top, max_capacity=context + top)
    gen = torch.Generator().manual_seed(0)
    vocab = runner.vocab_size
    runner.forward([Segment(kv, torch.randint(0, vocab, (context,), generator=gen).tolist(), num_logits=1)],
                   reuse_logits=True)
    kv.length = context
    kernels: tuple[bool | None, ...] = (False, True) if plan is not None else (None,)
    sizes = _affordable_sizes(runner, kv, vocab, gen, plan, kernels)  # warm-up round, stops at slow sizes
    best: dict[tuple[bool | None, int], float] = {}
    ratios: dict[tuple[bool | None, int], list[float]] = {}  # per kernel and size: paired ratios, a round each
    calls: dict[tuple[bool | None, int, Shape], float] = {}  # per kernel, size, layer shape: fastest calls

    def time_rounds(kernels: tuple[bool | None, ...]) -> None:
        for _ in range(rounds):
            for n in sizes:
                for kernel in kernels:
                    one = _timed_pass(runner, kv, 1, vocab, gen, plan, kernel)[0] if n > 1 else None
                    seconds, shapes = _timed_pass(runner, kv, n, vocab, gen, plan, kernel)
                    best[kernel, n] = min(best.get((kernel, n), float("inf")), seconds)
                    ratios.setdefault((kernel, n), []).append(seconds / max(one, 1e-9) if one else 1.0)
                    for shape, spent in shapes.items():
                        calls[kernel, n, shape] = min(calls.get((kernel, n, shape), float("inf")), spent)

    time_rounds(kernels)
    if plan is not None:
        shapes = {shape for _, _, shape in calls}
        plan.choose({n: best[False, n] for n in sizes}, {n: best[True, n] for n in sizes},
                    {shape: ({n: calls[False, n, shape] for n in sizes}, {n: calls[True, n, shape] for n in sizes})
                     for shape in shapes})
        kernels = (None,)  # the plan's own passes (per shape, the kernels mix) give the curve
        ratios.clear()
        time_rounds(kernels)
    if spread is not None:
        spread.update({n: max(max(ratios[k, n]) / min(ratios[k, n]) for k in kernels) for n in sizes})
    typical = {n: min(statistics.median(ratios[k, n]) for k in kernels) for n in sizes}
    points, prev = {}, 1.0
    for n in sizes:  # non-decreasing, and never above n: n single passes do the same work
        prev = min(max(prev, typical[n]), float(n))
        points[n] = round(prev, 4)
    return points


def measure_attention_cost(runner: ModelRunner, sizes: list[int], context: int = REFERENCE_CONTEXT,
                           far: int = REFERENCE_CONTEXT + FAR_KEYS, rounds: int = 3,
                           plan: KernelPlan | None = None) -> AttentionCost:
    """What each cached key past ``context`` adds to a pass (:class:`AttentionCost`): passes of the
    ``sizes`` in :data:`ATTENTION_SIZES` after ``context`` and after ``far`` keys, in rounds, each pair right
    after a one-token pass after ``context`` keys (its unit). Per size the median difference over the rounds,
    d(n) = (far − context) · (per_pass + per_token · n), fitted by least squares, neither part below 0 (on a
    GPU the attention of a few thousand keys is lost in the noise: both come out near 0)."""
    sizes = [n for n in ATTENTION_SIZES if n in sizes]
    gen = torch.Generator().manual_seed(1)
    vocab = runner.vocab_size
    near = SeqKV(runner.kv_shape, capacity=context + max(sizes), max_capacity=context + max(sizes))
    distant = SeqKV(runner.kv_shape, capacity=far + max(sizes), max_capacity=far + max(sizes))
    for kv, length in ((near, context), (distant, far)):
        for start in range(0, length, 512):
            chunk = torch.randint(0, vocab, (min(512, length - start),), generator=gen).tolist()
            runner.forward([Segment(kv, chunk, num_logits=1)], reuse_logits=True)
            kv.length = start + len(chunk)
    for n in sizes:  # warm-up, untimed
        _timed_pass(runner, distant, n, vocab, gen, plan)
    differences: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            unit = _timed_pass(runner, near, 1, vocab, gen, plan)[0]
            at_near = _timed_pass(runner, near, n, vocab, gen, plan)[0]
            at_far = _timed_pass(runner, distant, n, vocab, gen, plan)[0]
            differences[n].append((at_far - at_near) / max(unit, 1e-9) / (far - context))
    ns = np.array(sizes, dtype=np.float64)
    d = np.array([statistics.median(differences[n]) for n in sizes])
    per_pass, per_token = np.linalg.lstsq(np.stack([np.ones_like(ns), ns], axis=1), d, rcond=None)[0]
    if per_token < 0.0:
        per_pass, per_token = float(np.mean(d)), 0.0
    if per_pass < 0.0:
        per_pass, per_token = 0.0, float(np.dot(d, ns) / np.dot(ns, ns))
    return AttentionCost(max(0.0, float(per_pass)), max(0.0, float(per_token)), context)


def measure_pass_ratio(runner: ModelRunner, reference: ModelRunner, context: int = REFERENCE_CONTEXT,
                       rounds: int = 7) -> float:
    """A one-token pass of ``runner`` (a draft model) in one-token passes of ``reference`` (the target), both after
    ``context`` cached keys: the median of ``rounds`` ratios of the two passes timed back to back (a VM's speed
    drifts), after two untimed passes each. What the draft policy prices a drafted token at: the parameter counts'
    ratio says little where the two models run different kernels (a drafter off the target's int8 route cost 2.3
    of the target's passes where the counts said 0.35)."""
    gen = torch.Generator().manual_seed(2)
    kvs = []
    for r in (runner, reference):
        kv = SeqKV(r.kv_shape, capacity=context + 1, max_capacity=context + 1)
        r.forward([Segment(kv, torch.randint(0, r.vocab_size, (context,), generator=gen).tolist(), num_logits=1)],
                  reuse_logits=True)
        kv.length = context
        for _ in range(WARMUP_PASSES):
            _timed_pass(r, kv, 1, r.vocab_size, gen)
        kvs.append(kv)
    ratios = []
    for _ in range(rounds):
        mine = _timed_pass(runner, kvs[0], 1, runner.vocab_size, gen)[0]
        theirs = _timed_pass(reference, kvs[1], 1, reference.vocab_size, gen)[0]
        ratios.append(mine / max(theirs, 1e-9))
    return float(statistics.median(ratios))


def _timed_pass(runner: ModelRunner, kv: SeqKV, n: int, vocab: int, gen: torch.Generator,
                plan: KernelPlan | None = None, kernel: bool | None = None) -> tuple[float, dict[Shape, float]]:
    """Seconds of one pass over ``n`` tokens (with ``plan``: every linear on the packed kernel if ``kernel``,
    MKL if it is False, the plan's choice if None), and with a plan the seconds its layer calls took per
    layer shape; on a GPU the clock stops only once the kernels finished."""
    tokens = torch.randint(0, vocab, (n,), generator=gen).tolist()
    shapes: dict[Shape, float] = {}
    if plan is not None:
        plan.force, plan.timings = kernel, shapes
    try:
        synchronize(runner.device)
        start = time.perf_counter()
        # as the engine's passes of greedy requests (an ArgmaxHead may serve the head's rows)
        runner.forward([Segment(kv, tokens, num_logits=n, argmax_only=True)], reuse_logits=True)
        synchronize(runner.device)
        return time.perf_counter() - start, shapes
    finally:
        if plan is not None:
            plan.force, plan.timings = None, None


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _affordable_sizes(runner: ModelRunner, kv: SeqKV, vocab: int, gen: torch.Generator,
                      plan: KernelPlan | None = None, kernels: tuple[bool | None, ...] = (None,)) -> list[int]:
    """The sizes worth timing: warm-up passes at each size and kernel (the slowest of them is not counted),
    stopping after the first size whose warm pass exceeds ``MAX_PASS_SECONDS`` but never before ``MIN_SIZES``."""
    sizes = []
    for i, n in enumerate(MEASURE_SIZES):
        sizes.append(n)
        warm = min(min(_timed_pass(runner, kv, n, vocab, gen, plan, kernel)[0] for _ in range(WARMUP_PASSES))
                   for kernel in kernels)
        if i + 1 >= MIN_SIZES and warm > MAX_PASS_SECONDS:
            break
    return sizes


def measure_prompt_kernel_rows(runner: ModelRunner, chunk: int) -> int:
    """The most rows a prompt chunk may have and still run faster on exact mode's kernel (each row alone, as decode
    rows are) than on the library GEMM (``KVPool.kernel_rows``). Chunks of each size in
    :data:`PROMPT_ROUTE_SIZES` below ``chunk``, plus the prompt's last token, from an empty cache, timed on both
    routes one after the other (a second pair where they came within :data:`PROMPT_ROUTE_CLOSE`), after an
    untimed pair, then a last chunk's most rows (``chunk - 1``). The sizes stop at the first one where the library's
    route is as fast: the answer is the last size the kernel won (0 if none; ``chunk`` if it won them all: every
    chunk on the kernel). On a 2-core EPYC (Zen 3, AVX2, the 0.5B on int8 products) the library's route
    took 590 ms for a 20-token prompt and the kernel's 207 ms; 1054 and 663 ms for 84 tokens; 2538 and 2674 ms for
    324 (the library's GEMM packs its fp32 weights at every call, which short chunks do not amortise); the cost
    curve's bound (a kernel pass of at most two one-token passes) had let 5 rows run there. Once the kernel's passes
    of 48 rows and more read each input group once for 4 weight rows (``a2_rows_xs``), it won at every size there:
    403 tokens 3.21 -> 2.47 s."""
    gen = torch.Generator().manual_seed(2)

    def timed(n: int, on_kernel: bool) -> float:
        kv = SeqKV(runner.kv_shape, capacity=n + 1, max_capacity=n + 1)
        tokens = torch.randint(0, runner.vocab_size, (n + 1,), generator=gen).tolist()
        synchronize(runner.device)
        start = time.perf_counter()
        runner.forward([Segment(kv, tokens, num_logits=1, prompt_on_kernel=on_kernel, argmax_only=True)],
                       reuse_logits=True)
        synchronize(runner.device)
        return time.perf_counter() - start

    sizes = [n for n in PROMPT_ROUTE_SIZES if n < chunk - 1] + [chunk - 1]  # a last chunk's most rows
    for on_kernel in (False, True):  # warm-up, untimed
        timed(sizes[0], on_kernel)
    won = 0
    for n in sizes:
        library, kernel = timed(n, False), timed(n, True)
        if abs(library - kernel) < PROMPT_ROUTE_CLOSE * min(library, kernel):
            library, kernel = library + timed(n, False), kernel + timed(n, True)
        if kernel >= library:
            break
        won = n
    return chunk if won == chunk - 1 else won  # faster up to a whole chunk: every chunk


def cached_prompt_kernel_rows(runner: ModelRunner, model_key: str, cache_dir: Path, chunk: int,
                              plan: KernelPlan | None = None) -> int:
    """:func:`measure_prompt_kernel_rows`, measured once per model, route and machine (as the cost curve) and
    prompt chunk size, then read from a JSON file beside the curve's."""
    key = f"prompt route|chunk={chunk}|{_cost_key(runner, model_key, plan)}"
    path = cache_dir / f"prompt-route-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    try:
        return int(json.loads(path.read_text())["rows"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    rows = measure_prompt_kernel_rows(runner, chunk)
    log.info("prompt chunks of up to %d rows run on the kernel (faster there than on the library GEMM)", rows)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"key": key, "rows": rows}))
    tmp.replace(path)
    return rows


def valid_cost_points(points) -> dict[int, float] | None:
    """``points`` as ``{n: ratio}`` when they make a valid :class:`CostModel`, else None."""
    try:
        parsed = {int(n): float(r) for n, r in dict(points).items()}
        CostModel(parsed)
    except (ConfigError, TypeError, ValueError):
        return None
    return parsed


def cached_cost_model(runner: ModelRunner, model_key: str, cache_dir: Path,
                      plan: KernelPlan | None = None) -> CostModel:
    """Measure once per (model, dtype, device, torch version); later starts read the JSON. With a ``plan``
    (fp32 CPU linears with two kernels) the kernel chosen per layer shape and size is measured and cached
    with the curve. The curve comes with its attention's share per cached key (:func:`measure_attention_cost`).

    Always returns a valid model: an invalid cache file is ignored (and replaced), an invalid measurement
    falls back to ``DEFAULT_COST_POINTS`` and is not cached, so the next start measures again.
    """
    key = _cost_key(runner, model_key, plan)
    path = cache_dir / f"cost-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    cached = _read_cached(path, plan)
    if cached is not None:
        return cached
    spread: dict[int, float] = {}
    measured = valid_cost_points(measure_cost_points(runner, spread=spread, plan=plan))
    if measured is None:
        log.warning("the measured verify-cost curve is invalid; using the default curve (measured again next start)")
        return CostModel(dict(DEFAULT_COST_POINTS))
    if plan is not None:
        log.info("CPU linears per pass size: %s", plan.describe())
    try:
        attention = measure_attention_cost(runner, list(measured), plan=plan)
    except Exception as exc:  # noqa: BLE001 - start-up never fails because of the measurement
        log.warning("could not measure the attention's cost per cached key (%s); pricing passes without it", exc)
        attention = AttentionCost()
    log.info("attention per cached key: %.3g a pass, %.3g a token (one-token passes)", attention.per_pass,
             attention.per_token)
    if spread and statistics.median(spread.values()) > MAX_SPREAD:
        log.warning("the machine was busy while the verify-cost curve was measured (the paired ratios of one size varied "
                    "up to ×%.1f); using it now, refined from the passes run, and measuring again next start",
                    max(spread.values()))
        return CostModel(measured, attention)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    record = {"key": key, "points": measured, "attention": dataclasses.asdict(attention)}
    if plan is not None:
        record["packed_at"] = sorted(plan.packed_at)
        record["by_shape"] = {f"{i}x{o}": sorted(at) for (i, o), at in sorted(plan.by_shape.items())}
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)  # atomic: a concurrent start never reads half a file
    return CostModel(measured, attention)


def _cost_key(runner: ModelRunner, model_key: str, plan: KernelPlan | None = None) -> str:
    """What a measurement on this machine is cached under: the model and route, dtype, device, torch, the CPU count
    and foretell's kernel build."""
    key = f"v6|{model_key}|{runner.kv_shape.dtype}|{runner.device}|{torch.__version__}|{os.cpu_count()}"
    gemm = cpu_gemm.load() if runner.device.type == "cpu" else None
    if gemm is not None:  # a new build of foretell's kernels (linears, attention) prices passes anew
        key = f"{key}|cpu_gemm={gemm.path.parent.name}{'+amx' if gemm.amx else ''}"
    if plan is not None:
        key = f"v4|kernel plan per shape|{key}"
    return key


def _read_cached(path: Path, plan: KernelPlan | None = None) -> CostModel | None:
    """The cached model (applying its kernel choices to ``plan``), or None if absent or invalid."""
    try:
        record = json.loads(path.read_text())
        points = record["points"]
        attention = AttentionCost(**record["attention"])
        packed_at = frozenset(int(n) for n in record["packed_at"]) if plan is not None else frozenset()
        by_shape = {_shape(key): frozenset(int(n) for n in at)
                    for key, at in record.get("by_shape", {}).items()} if plan is not None else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ConfigError):
        return None
    valid = valid_cost_points(points)
    if valid is None:
        log.warning("ignoring the invalid cached verify-cost curve %s", path)
        return None
    if plan is not None:
        plan.adopt(list(valid), packed_at, by_shape)
    return CostModel(valid, attention)


def _shape(key: str) -> Shape:
    """A layer shape from its cache key ("896x4864": in x out features)."""
    i, o = key.split("x")
    return int(i), int(o)
