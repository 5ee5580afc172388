"""What goes into and comes out of the engine: requests, per-step outputs, per-request stats, errors."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal

from foretell.config import ConfigError, SamplingParams, SpeculationParams
from foretell.core.verify import TokenLogprob

FinishReason = Literal["stop", "length", "abort", "error"]


@dataclass
class GenerationRequest:
    """One completion to generate. ``prompt_ids`` are already templated and tokenised."""

    prompt_ids: list[int]
    max_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    speculation: SpeculationParams = field(default_factory=SpeculationParams)
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()  # in addition to the model's EOS ids
    ignore_eos: bool = False
    # the prompt's own logprobs (each prompt token's, after the tokens before it) with this many top
    # alternatives; computed on the request's own KV (no prefix-cache reuse, nothing cached after it)
    prompt_logprobs: int | None = None
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ConfigError("prompt", "must not be empty")
        if self.max_tokens < 1:
            raise ConfigError("max_tokens", "must be >= 1")
        if any(not s for s in self.stop):
            raise ConfigError("stop", "stop strings must be non-empty")
        if self.prompt_logprobs is not None and not 0 <= self.prompt_logprobs <= 20:
            raise ConfigError("prompt_logprobs", "must be between 0 and 20")


@dataclass
class SourceStats:
    """Draft tokens one source (prediction, ngram, draft) proposed and how many of them were accepted."""

    proposed: int = 0
    accepted: int = 0


@dataclass
class RequestStats:
    """Per-request accounting, with OpenAI's meanings for the prediction counts: accepted = prediction tokens
    that appeared in the completion (in order, along the aligner's path; whoever drafted them, so the count
    depends on the output alone); rejected = prediction tokens that did not (len(prediction) - accepted).
    What speculation cost in compute is in ``draft_tokens_proposed`` / ``draft_tokens_accepted`` (all
    proposers, every pass).
    """

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    accepted_prediction_tokens: int = 0
    rejected_prediction_tokens: int = 0
    draft_tokens_proposed: int = 0  # all proposers (prediction, n-gram, draft model)
    draft_tokens_accepted: int = 0
    sources: dict[str, SourceStats] = field(default_factory=dict)  # the same, per draft source
    forward_passes: int = 0  # every pass this request took part in, prompt chunks included
    prefill_passes: int = 0  # of which passes over a prompt chunk that sampled nothing
    queue_s: float = 0.0
    ttft_s: float = 0.0
    decode_s: float = 0.0
    cascade_drafter_tokens: int = 0  # cascades: output tokens taken from the drafter's distribution

    def record_draft(self, source: str, proposed: int, accepted: int) -> None:
        """Count one verified draft: ``accepted`` of its ``proposed`` tokens, from ``source``."""
        self.draft_tokens_proposed += proposed
        self.draft_tokens_accepted += accepted
        counts = self.sources.setdefault(source, SourceStats())
        counts.proposed += proposed
        counts.accepted += accepted


@dataclass
class RequestOutput:
    """What one engine step produced for one request (deltas since the previous output)."""

    request_id: str
    new_token_ids: list[int]
    new_text: str
    from_prediction: list[bool]  # per new token: was it an accepted prediction token
    new_logprobs: list[TokenLogprob] | None
    finished: bool
    finish_reason: FinishReason | None
    stats: RequestStats
    token_texts: list[str] | None = None  # per new token: the text it added (before stop strings are cut)
    error: "RequestFailedError | None" = None  # set with finish_reason "error": this request alone failed
    prompt_logprobs: "list[TokenLogprob] | None" = None  # first output only: prompt tokens 1.. (see the request)


class EngineError(Exception):
    """Base class for errors the server maps to HTTP statuses."""

    status = 500


class QueueFullError(EngineError):
    status = 429


class RequestTooLongError(EngineError):
    """prompt + max_tokens (or the prediction) exceed what the engine accepts. ``field`` names the input."""

    status = 400

    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field = field_name


class RequestFailedError(EngineError):
    """This request failed inside the engine (a bug, or memory ran out for it); the others go on.
    ``code`` is the OpenAI-style error code the server answers with."""

    def __init__(self, message: str, status: int = 500, code: str = "internal_error"):
        super().__init__(message)
        self.status = status
        self.code = code
