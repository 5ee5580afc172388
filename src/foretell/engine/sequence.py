"""The state of one request inside the engine: tokens, KV, proposer, sampler, stops and stats."""

from __future__ import annotations

import enum
import time

from foretell.core.draft import Draft
from foretell.core.policy import Decision, DraftPolicy
from foretell.core.grammar import Grammar
from foretell.core.sampling import SamplerState
from foretell.engine.api import FinishReason, GenerationRequest, RequestOutput, RequestStats, TokenLogprob
from foretell.engine.detok import IncrementalDetokenizer, StopStringMatcher
from foretell.engine.kv_cache import SeqKV


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class Sequence:
    """Invariant while running: ``kv.length < len(tokens)``; tokens[kv.length:] are fed in the next pass."""

    def __init__(
        self,
        req: GenerationRequest,
        tokenizer,
        stop_ids: frozenset[int],
        limit: int,
        policy: DraftPolicy,
        grammar: Grammar | None = None,
    ):
        self.req = req
        self.id = req.request_id
        self.tokens = list(req.prompt_ids)
        self.num_prompt = len(req.prompt_ids)
        self.limit = limit  # total tokens (prompt + output) this sequence may reach
        self.stop_ids = stop_ids
        self.policy = policy  # picks each step's draft among the proposer's sources
        self.proposer = policy.proposer
        self.sampler = SamplerState(req.sampling, req.prompt_ids, grammar=grammar)
        self.detok = IncrementalDetokenizer(tokenizer)
        self.stopper = StopStringMatcher(req.stop)
        self.pieces: list[str] = []  # text deltas of the tokens appended since the last output
        self.status = Status.WAITING
        self.kv: SeqKV | None = None
        self.decision = Decision()  # this step's draft and why
        self.batch_tokens = 0  # tokens of the pass ahead of this request's segment
        self.finish_reason: FinishReason | None = None
        self.stats = RequestStats(prompt_tokens=self.num_prompt)
        self.arrival = time.perf_counter()
        self.first_token_at: float | None = None
        self.scheduled_at: float | None = None
        # the prompt's logprobs, gathered chunk by chunk (None: not asked); sent with the first output
        self.prompt_logprobs: list[TokenLogprob] | None = [] if req.prompt_logprobs is not None else None
        self._prompt_logprobs_sent = False

    @property
    def argmax_only(self) -> bool:
        """Whether this request reads only the argmax of its logits: greedy, without logprobs, logit bias,
        penalties or a draft model (whose cascade rules read the target's distribution)."""
        params = self.req.sampling
        return (params.greedy and params.logprobs is None and not params.adjusts_logits
                and not self.req.speculation.uses_draft_model)

    @property
    def draft(self) -> Draft:
        return self.decision.draft

    @property
    def num_output(self) -> int:
        return len(self.tokens) - self.num_prompt

    @property
    def pending(self) -> int:
        """Tokens whose keys/values are not yet in the KV."""
        return len(self.tokens) - self.kv.length

    @property
    def remaining(self) -> int:
        """How many more tokens may be appended."""
        return self.limit - len(self.tokens)

    def append(self, token: int) -> bool:
        """Append one token and apply the stop rules in plain decoding's order; True when finished."""
        self.tokens.append(token)
        if token in self.stop_ids:
            return self._finish("stop")
        piece = self.detok.add(token)
        self.pieces.append(piece)
        if self.stopper.add(piece):
            return self._finish("stop")
        if self.remaining <= 0:
            return self._finish("length")
        return False

    def _finish(self, reason: FinishReason) -> bool:
        self.finish_reason = reason
        self.status = Status.FINISHED
        return True

    def abort(self) -> None:
        self._finish("abort")

    def output(self, new_ids: list[int], flags: list[bool], logprobs: list[TokenLogprob] | None) -> RequestOutput:
        finished = self.status is Status.FINISHED
        if finished:  # OpenAI's meaning: prediction tokens that did not appear in the completion
            predicted = len(self.req.speculation.prediction or ())
            self.stats.rejected_prediction_tokens = max(0, predicted - self.stats.accepted_prediction_tokens)
        self.stats.completion_tokens = self.num_output
        pieces, self.pieces = self.pieces, []
        prompt_logprobs = None
        if self.prompt_logprobs is not None and not self._prompt_logprobs_sent:
            prompt_logprobs, self._prompt_logprobs_sent = self.prompt_logprobs, True
        return RequestOutput(
            request_id=self.id,
            new_token_ids=new_ids,
            new_text=self.stopper.take(final=finished),
            from_prediction=flags,
            new_logprobs=logprobs,
            finished=finished,
            finish_reason=self.finish_reason,
            stats=self.stats,
            token_texts=pieces,
            prompt_logprobs=prompt_logprobs,
        )
