"""Request and usage translation between OpenAI's ``prediction`` and vLLM's ``vllm_xargs`` (pure, no vLLM).

On the way in, :func:`parse_fields` validates foretell's fields on a chat or completions body (the same
rules and 400s as the embedded server: :class:`foretell.server.protocol.Prediction`), and
:func:`rewrite_body` moves them into ``vllm_xargs``, which vLLM copies into ``SamplingParams.extra_args``
where the worker's proposer reads them. The prediction travels as token ids, tokenised once here.

On the way out, :func:`usage_details` computes OpenAI's prediction counts. vLLM does not fill them, so:

- ``accepted_prediction_tokens``: prediction tokens that appeared in the completion (the matching blocks of
  the output's and the prediction's token ids), whoever drafted them: OpenAI's meaning and the embedded
  engine's (which counts along its aligner's path);
- ``rejected_prediction_tokens``: prediction tokens that did not appear in the completion,
  ``len(prediction) - accepted`` (OpenAI's meaning, as on the embedded engine).

The ``foretell`` stats block carries what vLLM's per-request metrics say: forward passes that produced
output (:func:`forward_passes`), draft tokens proposed and accepted.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from pydantic import Field, ValidationError

from foretell.integrations.vllm import XARG_K_MAX, XARG_METHOD, XARG_PREDICTION, XARG_SEARCH_LENGTH
from foretell.server.errors import APIError, bad_request, from_validation_error
from foretell.server.protocol import FIELD_NAMES, Prediction, Strict, join_text

METHODS = ("auto", "none", "ngram", "prediction")
OUR_FIELDS = ("prediction", "prediction_search_length", "speculation")


class Speculation(Strict):
    """The ``speculation`` request extension (DESIGN.md), as far as the vLLM proposer can honour it."""

    method: Literal["auto", "none", "ngram", "prediction"] = "auto"
    k_max: int | None = Field(None, ge=0, le=1024)


class _Fields(Strict):
    prediction: Prediction | None = None
    prediction_search_length: int | None = Field(None, ge=1)
    speculation: Speculation | None = None


_NAMES = FIELD_NAMES | frozenset({"speculation", "method", "k_max"})


@dataclass(frozen=True)
class ForetellFields:
    """foretell's fields of one request, validated. ``prediction`` is the text (None = no prediction)."""

    prediction: str | None = None
    search_length: int | None = None
    method: str = "auto"
    k_max: int | None = None

    @property
    def given(self) -> bool:
        return self.prediction is not None or self.search_length is not None or self.method != "auto" \
            or self.k_max is not None


def parse_fields(body: dict[str, Any]) -> ForetellFields:
    """Validate ``prediction``, ``prediction_search_length`` and ``speculation`` of a request body.

    Raises :class:`APIError` (400, ``param`` naming the field) for a bad value, e.g. ``prediction.type``
    other than ``"content"``, a non-text content part, or a search length below 1.
    """
    try:
        fields = _Fields.model_validate({k: body[k] for k in OUR_FIELDS if k in body})
    except ValidationError as exc:
        raise from_validation_error(exc, _NAMES) from None
    text = None
    if fields.prediction is not None:
        text = join_text(fields.prediction.content, "prediction.content", "")
    spec = fields.speculation or Speculation()
    if spec.method == "prediction" and not text:
        raise bad_request("speculation.method", "speculation.method 'prediction' needs a non-empty prediction")
    return ForetellFields(text, fields.prediction_search_length, spec.method, spec.k_max)


def rewrite_body(body: dict[str, Any], fields: ForetellFields, prediction_ids: Sequence[int] | None
                 ) -> dict[str, Any]:
    """The body vLLM gets: foretell's fields removed, their values in ``vllm_xargs`` (the client's own
    ``vllm_xargs`` are kept; a client cannot smuggle a prediction past validation through them)."""
    out = {k: v for k, v in body.items() if k not in OUR_FIELDS}
    xargs = {k: v for k, v in dict(body.get("vllm_xargs") or {}).items() if not k.startswith("foretell_")}
    if prediction_ids:
        xargs[XARG_PREDICTION] = [int(t) for t in prediction_ids]
    if fields.search_length is not None:
        xargs[XARG_SEARCH_LENGTH] = fields.search_length
    if fields.method != "auto":
        xargs[XARG_METHOD] = fields.method
    if fields.k_max is not None:
        xargs[XARG_K_MAX] = fields.k_max
    if xargs:
        out["vllm_xargs"] = xargs
    return out


def matched_tokens(prediction: Sequence[int], output: Sequence[int]) -> int:
    """Output tokens that line up with the prediction: the sizes of the matching blocks of the two token
    sequences (difflib, no junk heuristic), i.e. an alignment that keeps order."""
    if not prediction or not output:
        return 0
    matcher = difflib.SequenceMatcher(None, list(prediction), list(output), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())


@dataclass(frozen=True)
class SpecStats:
    """vLLM's per-request speculative-decoding counts (``metrics.speculative_decoding`` of a response)."""

    num_draft_tokens: int
    num_accepted_draft_tokens: int
    num_spec_steps: int = 0

    @classmethod
    def from_response(cls, payload: dict[str, Any]) -> "SpecStats | None":
        spec = (payload.get("metrics") or {}).get("speculative_decoding")
        if not isinstance(spec, dict):
            return None
        try:
            return cls(int(spec["num_draft_tokens"]), int(spec["num_accepted_draft_tokens"]),
                       int(spec.get("num_spec_steps", 0)))
        except (KeyError, TypeError, ValueError):
            return None


def usage_details(prediction_len: int, matched: Sequence[int], completion_tokens: int,
                  spec: SpecStats | None) -> tuple[dict[str, int], dict[str, Any] | None]:
    """(OpenAI's completion-token prediction counts, the ``foretell`` stats block or None).

    ``matched`` holds :func:`matched_tokens` per choice; ``spec`` is vLLM's per-request metrics (only given
    for single-choice requests).
    """
    accepted = [min(m, prediction_len) for m in matched]
    if not prediction_len:
        accepted = [0 for _ in matched]
    details = {
        "accepted_prediction_tokens": sum(accepted),
        "rejected_prediction_tokens": sum(max(0, prediction_len - a) for a in accepted) if prediction_len else 0,
    }
    stats = None
    if spec is not None:
        stats = {
            "forward_passes": forward_passes(completion_tokens, spec),
            "draft_tokens_proposed": spec.num_draft_tokens,
            "draft_tokens_accepted": spec.num_accepted_draft_tokens,
        }
    return details, stats


def forward_passes(completion_tokens: int, spec: SpecStats) -> int:
    """Engine steps that produced the completion: vLLM's verify steps with a draft (each emits its accepted
    drafts + 1) plus the steps without one (1 token each). When the last step overshot ``max_tokens`` (its
    extra accepted tokens are dropped), the steps without a draft can only be bounded below, by 0."""
    emitted_by_spec_steps = spec.num_accepted_draft_tokens + spec.num_spec_steps
    return spec.num_spec_steps + max(0, completion_tokens - emitted_by_spec_steps)


def patch_usage(usage: dict[str, Any], details: dict[str, int], key: str = "completion_tokens_details") -> dict[str, Any]:
    """Usage with OpenAI's prediction counts filled in (others kept): in ``completion_tokens_details``, or in a
    Responses API usage's ``output_tokens_details``."""
    out = dict(usage)
    ctd = dict(out.get(key) or {})
    ctd.setdefault("reasoning_tokens", 0)
    ctd.update(details)
    out[key] = ctd
    return out


def error_body(exc: APIError) -> dict[str, Any]:
    """OpenAI's error shape, as the embedded server answers it."""
    return exc.body()
