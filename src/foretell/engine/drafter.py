"""Draft-model speculation: a smaller model with the target's vocabulary drafts k tokens for every request
that asks for it (``speculation.method`` "draft" or "cascade"), all requests batched in one packed pass per
draft position, each with its own KV (written by position, so a rejected draft costs nothing to undo).

Once per engine step, before scheduling, :meth:`DraftModel.prepare` runs:

    pass 0:  each request's tokens the drafter has not seen yet (prompt, accepted drafts, the target's
             token) → q_0, sample x_0
    pass j:  x_{j-1} → q_j, sample x_j            (j < k; k + 1 passes for cascades: q_k is the bonus row)

Rollback is implicit: the next :meth:`prepare` keeps the drafter's KV up to the longest common prefix of
what it drafted and what the request actually emitted, and feeds the rest.

Each drafted token comes with q: the drafter's processed distribution it was sampled from (``probs``,
temperature/top-k/top-p/min-p applied like the target's sampler; one-hot of the argmax for greedy requests)
and the untempered softmax (``raw_probs``) that the cascade deferral rules read. Token j is drawn with the
request's seeded DRAFT uniform of its output position. Verification (:func:`verify_step`) is the shared
rejection sampler, so "draft" outputs follow the target's distribution exactly (greedy: identical tokens);
"cascade" verifies against π from :func:`foretell.core.verify.cascade_distributions` and counts the tokens
whose position kept the drafter's distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import torch

from foretell.config import ConfigError, SpeculationParams
from foretell.core.draft import Draft, Proposer
from foretell.core.sampling import Purpose, SamplerState, penalize, process_logits, sample_inverse_cdf
from foretell.core.verify import VerifyResult, token_logprobs, cascade_distributions, rejection_sample, verify
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import ModelRunner, Segment
from foretell.models.default_model import ModelError

if TYPE_CHECKING:
    from foretell.engine.sequence import Sequence as EngineSequence

SOURCE = "draft"


class VocabularyMismatch(ModelError):
    """The draft model cannot draft for the target: its tokenizer is not the target's."""


@dataclass
class ModelDraft(Draft):
    """A draft-model draft. ``probs`` = q_t[k, V] (processed); ``raw_probs`` = untempered q[k or k + 1, V];
    ``bonus_probs`` = q_t at the position after the draft (cascades); ``cascade`` = (rule, alpha) or None."""

    raw_probs: Any = None
    bonus_probs: Any = None
    cascade: tuple[str, float] | None = None

    def truncated(self, k: int) -> "ModelDraft":
        """The first ``k`` tokens; q at position k (when drafted) becomes the bonus row."""
        if k >= len(self.tokens):
            return self
        return ModelDraft(
            tokens=self.tokens[:k],
            probs=self.probs[:k],
            source=self.source,
            raw_probs=self.raw_probs[: k + 1],
            bonus_probs=self.probs[k] if self.cascade else None,
            cascade=self.cascade,
        )


class DraftModelProposer(Proposer):
    """One request's view of the draft model: hands out what :meth:`DraftModel.prepare` drafted this step.
    ``token_cost``: one drafter pass in one-token target passes (the draft policy prices drafting with it)."""

    source = SOURCE

    def __init__(self, token_cost: float = 1.0) -> None:
        self.prepared: ModelDraft | None = None
        self.token_cost = token_cost

    def available(self) -> int:
        return len(self.prepared.tokens) if self.prepared is not None else 0

    def propose(self, k: int) -> Draft:
        draft, self.prepared = self.prepared, None
        return draft.truncated(k) if draft is not None else Draft()

    def observe(self, tokens: Sequence[int]) -> None:
        """Nothing to do: the next :meth:`DraftModel.prepare` compares its tokens with the request's."""


class _State:
    """The drafter's KV for one request and the tokens whose keys/values it holds."""

    def __init__(self, kv: SeqKV):
        self.kv = kv
        self.tokens: list[int] = []

    def missing(self, tokens: list[int]) -> int:
        """How many of ``tokens`` the next :meth:`sync` would feed (at least the last). Asked every step for every
        request that may draft with the model: the whole prefix compares in C, the token loop only where it differs."""
        limit = min(self.kv.length, len(tokens) - 1)
        if self.tokens[:limit] == tokens[:limit]:
            return len(tokens) - limit
        n = 0
        while n < limit and self.tokens[n] == tokens[n]:
            n += 1
        return len(tokens) - n

    def sync(self, tokens: list[int]) -> list[int]:
        """Roll back to the common prefix with ``tokens`` (at most all but the last); the tokens to feed."""
        n = len(tokens) - self.missing(tokens)
        self.kv.length = n
        self.tokens = list(tokens[:n])
        return list(tokens[n:])


class DraftModel:
    """The server's draft model, shared by all requests: per-request KV, k batched passes per step."""

    def __init__(self, runner: ModelRunner, target_vocab: int, k: int = 4, target_tokenizer=None, tokenizer=None,
                 token_cost: float = 1.0):
        check_vocabularies(runner.vocab_size, target_vocab, tokenizer, target_tokenizer)
        self.runner = runner
        self.k = k
        self.token_cost = token_cost  # one drafter pass in target passes (their parameter_count's ratio)
        self.states: dict[str, _State] = {}
        self.passes = 0  # drafter forward passes so far

    def proposer(self, spec: SpeculationParams) -> DraftModelProposer:
        return DraftModelProposer(self.token_cost)

    def release(self, seq_id: str) -> None:
        """Free a request's drafter KV (finished or aborted)."""
        self.states.pop(seq_id, None)

    # -- the batched drafting -----------------------------------------------------------------------
    def prepare(self, seqs: list["EngineSequence"], max_pending: int) -> None:
        """Draft for every running request whose proposer is ours and whose pending tokens fit one pass
        (``max_pending``, the target's prefill chunk): the result waits in its proposer."""
        live = {s.id for s in seqs}
        for gone in [i for i in self.states if i not in live]:
            self.release(gone)
        for seq in seqs:
            part = drafter_part(seq.proposer)
            if part is not None:
                part.prepared = None  # a draft not used last step is stale
        jobs = [_Job(s, self._state(s), self._steps(s)) for s in seqs if self._wants(s, max_pending)]
        if not jobs:
            return
        for job in jobs:
            job.feed = job.state.sync(job.seq.tokens)
        for j in range(max(job.steps for job in jobs)):
            active = [job for job in jobs if job.steps > j]
            segments = [Segment(job.state.kv, job.feed, num_logits=1) for job in active]
            logits = self.runner.forward(segments)
            self.passes += 1
            for job, seg, row in zip(active, segments, logits):
                job.state.kv.length += len(seg.tokens)
                job.state.tokens += seg.tokens
                job.take(row[0], j)
        for job in jobs:
            drafter_part(job.seq.proposer).prepared = job.draft()

    def _wants(self, seq: "EngineSequence", max_pending: int) -> bool:
        """A request drafts with the model when the model is its proposer, or one of its proposer's parts and
        the draft policy prices the model's draft, its catch-up included, above the other parts' (e.g. the
        prediction while aligned). Unpriced, the catch-up cost the 1.5B's held-out-like type hints 7 s of 19
        (Zen 4): 4.45 s to feed the 0.5B the prompt, then 1.0-1.5 s after each long run of the prediction."""
        part = drafter_part(seq.proposer)
        if part is None or seq.kv is None or not 0 < seq.pending <= max_pending:
            return False
        steps = self._steps(seq)
        if steps <= 0:
            return False
        if part is seq.proposer:
            return True
        state = self.states.get(seq.id)
        catch_up = state.missing(seq.tokens) if state is not None else len(seq.tokens)
        return seq.policy.would_choose(part, steps, max(0, seq.remaining - 1), len(seq.tokens), catch_up,
                                       optional=bool(seq.req.speculation.prediction))

    def _steps(self, seq: "EngineSequence") -> int:
        """Drafter passes for this request: k tokens (a request's k_max and its remaining room lower it);
        one more for a cascade, whose bonus position needs q too."""
        spec = seq.req.speculation
        k = min(self.k, spec.k_max if spec.k_max is not None else self.k, seq.remaining - 1)
        if k <= 0:
            return 0
        return k + 1 if spec.method == "cascade" else k

    def _state(self, seq: "EngineSequence") -> _State:
        state = self.states.get(seq.id)
        if state is None:
            cap = seq.limit + self.k + 1
            state = _State(SeqKV(self.runner.kv_shape, capacity=min(len(seq.tokens) + 64, cap), max_capacity=cap))
            self.states[seq.id] = state
        return state


def drafter_part(proposer: Proposer | None) -> DraftModelProposer | None:
    """The draft model's part of a request's proposer (the proposer itself, or one of its parts), if any."""
    if proposer is None:
        return None
    return next((p for p in proposer.parts() if isinstance(p, DraftModelProposer)), None)


def parameter_count(model) -> int:
    """A model's parameters as loaded: count them before foretell's runner swaps its layers (some then keep bf16
    copies as buffers, or only int8 panels)."""
    return sum(p.numel() for p in model.parameters())


class _Job:
    """One request's drafting within :meth:`DraftModel.prepare`."""

    def __init__(self, seq: "EngineSequence", state: _State, steps: int):
        self.seq = seq
        self.state = state
        self.steps = steps
        self.cascade = seq.req.speculation.method == "cascade"
        self.num_tokens = steps - 1 if self.cascade else steps
        self.feed: list[int] = []
        self.tokens: list[int] = []
        self.q_t: list[torch.Tensor] = []
        self.q_raw: list[torch.Tensor] = []

    def take(self, logits: torch.Tensor, j: int) -> None:
        """Record q at draft position j and, unless it is the cascade's bonus row, sample x_j from it."""
        q_t, q_raw = draft_distributions(logits, self.seq.sampler)
        self.q_t.append(q_t)
        self.q_raw.append(q_raw)
        if j < self.num_tokens:
            u = self.seq.sampler.uniforms(j, 1, Purpose.DRAFT)
            token = int(sample_inverse_cdf(q_t[None], u)[0])
            self.tokens.append(token)
            self.feed = [token]

    def draft(self) -> ModelDraft:
        spec = self.seq.req.speculation
        k = self.num_tokens
        return ModelDraft(
            tokens=self.tokens,
            probs=torch.stack(self.q_t[:k]),
            source=SOURCE,
            raw_probs=torch.stack(self.q_raw),
            bonus_probs=self.q_t[k] if self.cascade else None,
            cascade=(spec.cascade_rule, spec.cascade_alpha) if self.cascade else None,
        )


def draft_distributions(logits: torch.Tensor, state: SamplerState) -> tuple[torch.Tensor, torch.Tensor]:
    """(q_t, q) for one drafter row: q_t is what the draft token is sampled from (the request's processing:
    penalties over the output so far, temperature, min-p/top-k/top-p; greedy: one-hot of the argmax), q the
    untempered softmax of the raw logits."""
    row = logits.float()[None]
    q_raw = row.softmax(dim=-1)[0]
    if state.params.greedy:
        q_t = torch.zeros_like(q_raw)
        q_t[int(penalize(row, state).argmax())] = 1.0
    else:
        q_t = process_logits(row, state).softmax(dim=-1)[0]
    return q_t, q_raw


def verify_step(logits: torch.Tensor, draft: Draft, state: SamplerState) -> tuple[VerifyResult, list[bool]]:
    """(result, per emitted token: was it taken from the drafter's distribution): lossless :func:`verify`
    for every draft (flags all False), except a cascade draft, which is verified against π (with its bonus
    row when the drafter gave one); a token counts as the drafter's when its position kept the drafter's
    distribution for it (rule-based: δ = 0; token-specific: the token is in the acceptance set)."""
    cascade = getattr(draft, "cascade", None)
    if cascade is None:
        result = verify(logits, draft, state)
        return result, [False] * len(result.tokens)
    rule, alpha = cascade
    pi, q_t, kept = cascade_distributions(logits, draft, state, rule, alpha, draft.raw_probs, draft.bonus_probs)
    tokens = rejection_sample(pi, draft.tokens, q_t, state)
    flags = [bool(kept[j, t]) for j, t in enumerate(tokens)]
    return VerifyResult(tokens, len(tokens) - 1, token_logprobs(logits, tokens, state.params.logprobs)), flags


def check_vocabularies(draft_vocab: int, target_vocab: int, draft_tokenizer=None, target_tokenizer=None) -> None:
    """Refuse a drafter whose vocabulary is not the target's (sizes of the output layers may differ by padding
    rows, but the tokenizers must map the same strings to the same ids)."""
    if draft_tokenizer is not None and target_tokenizer is not None:
        if draft_tokenizer.get_vocab() != target_tokenizer.get_vocab():
            raise VocabularyMismatch(
                "--draft-model: the draft model's tokenizer differs from the target's (different token ids); a draft model must "
                "share the target's vocabulary, e.g. a smaller model of the same family"
            )
        draft_vocab_used = len(draft_tokenizer)
        if draft_vocab < draft_vocab_used or target_vocab < draft_vocab_used:
            raise VocabularyMismatch(f"output layers ({draft_vocab}, {target_vocab}) smaller than the vocabulary")
        return
    if draft_vocab != target_vocab:
        raise VocabularyMismatch(
            f"--draft-model: the draft model's vocabulary has {draft_vocab} entries, the target's {target_vocab}; a draft model "
            "must share the target's vocabulary"
        )


def require_draft_model(spec: SpeculationParams, drafter: DraftModel | None) -> None:
    """A request asking for the draft model on a server without one gets a 400 naming the field."""
    if spec.uses_draft_model and drafter is None:
        raise ConfigError(
            "speculation.method",
            f"'{spec.method}' needs a draft model and this server has none (start it with --draft-model NAME|PATH)",
        )
