"""Verification: from the target's logits over a draft to the tokens the target itself would emit.

Notation: p = the target's processed distribution, q = the draft's (the distribution a draft token was
sampled from). ``logits[j]`` is the target's prediction for the output position right after ``draft[:j]``;
with k draft tokens there are k + 1 rows, the last one giving the "bonus" token when all k are accepted.

* greedy: accept while the argmax of the penalised logits equals the draft; then emit that argmax.
* one-hot draft (``Draft.probs is None``, q = δ_d): sample y ~ p at each position with the position's
  seeded uniform and accept while y = d; emit y at the first mismatch. This is exactly p and the very
  token plain seeded decoding would sample.
* draft distribution q: rejection sampling (Leviathan et al. 2023): accept x ~ q with probability
  min(1, p(x)/q(x)); on rejection emit a sample of norm(max(0, p − q)) and stop; after k acceptances emit
  a bonus token from p. The output is distributed exactly as p.

Every result holds the accepted draft prefix plus exactly one token from the target. Nothing here
mutates the :class:`SamplerState`; the caller observes the tokens it keeps. A seeded request emits the
very tokens of plain decoding with greedy or one-hot drafts; with draft distributions the tokens follow
the same distribution p but may differ (the accept test and residual use their own uniforms).

Speculative cascades (Narasimhan et al., ICLR 2025) replace p by a target π mixing q and p
(:func:`cascade_target`) and verify against π with the same rejection step (:func:`verify_cascade`).
That trades exactness for speed; lossless verification (:func:`verify`) remains the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from foretell.core.draft import Draft
from foretell.core.sampling import Purpose, SamplerState, argmax_rows, penalize, sample_inverse_cdf, target_probs


@dataclass(frozen=True)
class TokenLogprob:
    """An emitted token's log-probability under the raw target logits and the ``top`` best alternatives."""

    token_id: int
    logprob: float
    top: list[tuple[int, float]]


@dataclass
class VerifyResult:
    """The accepted draft prefix plus exactly one target token; ``logprobs``: one entry per token if asked."""

    tokens: list[int]
    num_accepted: int
    logprobs: list[TokenLogprob] | None = None

    def __post_init__(self) -> None:
        if self.num_accepted != len(self.tokens) - 1 or self.num_accepted < 0:
            raise ValueError(f"num_accepted={self.num_accepted} does not fit {len(self.tokens)} tokens")
        if self.logprobs is not None and len(self.logprobs) != len(self.tokens):
            raise ValueError("one logprob entry per emitted token is required")


def verify(logits: torch.Tensor, draft: Draft, state: SamplerState) -> VerifyResult:
    """Tokens the target emits for ``draft`` given its ``logits[len(draft) + 1, V]``; never mutates state."""
    _check_inputs(logits, draft)
    if state.params.greedy:
        tokens = _verify_greedy(logits, draft.tokens, state)
    elif draft.probs is None:
        tokens = _verify_one_hot(logits, draft.tokens, state)
    else:
        p = target_probs(logits, state, draft.tokens)
        tokens = rejection_sample(p, draft.tokens, draft.probs, state)
    return VerifyResult(tokens, len(tokens) - 1, token_logprobs(logits, tokens, state.params.logprobs))


def verify_tree(logits: torch.Tensor, branches: Sequence[tuple[Draft, Sequence[int]]],
                state: SamplerState) -> tuple[int, VerifyResult]:
    """Verify several one-hot drafts that share their first position (a token tree) in one pass.

    ``logits[1 + nodes, V]``: row 0 predicts the first draft position, row 1 + i the position after tree
    node i. Each branch is (draft, the node indices of its tokens, root first). Along every branch the target
    emits what plain decoding would (greedy, or the seeded sample of each position), so the branch that
    agrees longest with the target gives the right tokens; returns (its index, its result), the first
    branch on ties. Drafts with probabilities q need rejection sampling over the tree and are refused.
    """
    best: tuple[int, VerifyResult] | None = None
    for b, (draft, path) in enumerate(branches):
        if draft.probs is not None:
            raise ValueError("token trees are verified for one-hot drafts only")
        rows = logits[[0] + [1 + i for i in path]]
        result = verify(rows, draft, state)
        if best is None or result.num_accepted > best[1].num_accepted:
            best = (b, result)
    if best is None:
        raise ValueError("a token tree needs at least one branch")
    return best


def verify_greedy_batch(logits: torch.Tensor, drafts: Sequence[Sequence[int]]) -> list[list[int]]:
    """Greedy, no-penalty verification of many sequences at once.

    ``logits[B, n, V]`` (rows past ``len(drafts[b]) + 1`` are padding); returns, per sequence, the accepted
    draft prefix plus the target's next token. Only valid for greedy requests without penalties.
    """
    if logits.dim() != 3 or logits.shape[0] != len(drafts):
        raise ValueError(f"expected logits[{len(drafts)}, n, V], got {tuple(logits.shape)}")
    batch, rows, _ = logits.shape
    if any(len(d) >= rows for d in drafts):
        raise ValueError(f"a draft is longer than {rows - 1} tokens")
    choices = argmax_rows(logits.reshape(-1, logits.shape[-1])).reshape(logits.shape[:2])  # [B, n]
    padded = torch.full((batch, rows - 1), -1, dtype=choices.dtype)
    for b, draft in enumerate(drafts):
        padded[b, : len(draft)] = torch.tensor(list(draft), dtype=choices.dtype)
    padded = padded.to(choices.device)
    num_accepted = (choices[:, :-1] == padded).long().cumprod(dim=1).sum(dim=1)
    next_tokens = choices.gather(1, num_accepted[:, None]).squeeze(1)
    return [list(d[:m]) + [t] for d, m, t in zip(drafts, num_accepted.tolist(), next_tokens.tolist())]


def rejection_sample(
    target: torch.Tensor, draft_tokens: Sequence[int], draft_probs: torch.Tensor, state: SamplerState
) -> list[int]:
    """Rejection sampling of ``draft_tokens`` (drawn from ``draft_probs`` q[k, V']) against target[k+1, V].

    Accepts x_j while u_j · q(x_j) < target(x_j) (u_j the ACCEPT uniform of that position, i.e. with
    probability min(1, target/q)); at the first rejection emits a RESIDUAL-uniform sample of
    norm(max(0, target − q)); after k acceptances emits a SAMPLE-uniform bonus token from target[k].
    """
    k, vocab = len(draft_tokens), target.shape[-1]
    q = _match_vocab(draft_probs.float(), vocab)
    x = torch.tensor(list(draft_tokens), dtype=torch.long, device=target.device).clamp(max=vocab - 1)[:, None]
    p_x = target[:k].gather(1, x).squeeze(1).tolist()
    q_x = q.gather(1, x).squeeze(1).tolist()
    u = state.uniforms(0, k, Purpose.ACCEPT).tolist()
    accepted = [t < vocab and u_j * q_j < p_j for t, u_j, q_j, p_j in zip(draft_tokens, u, q_x, p_x)]
    m = _leading(accepted)
    if m == k:
        last = sample_inverse_cdf(target[k:], state.uniforms(k, 1, Purpose.SAMPLE))
    else:
        residual = (target[m] - q[m]).clamp(min=0.0)
        if not residual.sum() > 0:  # p == q up to rounding: rejection had probability ~0
            residual = target[m]
        last = sample_inverse_cdf(residual[None], state.uniforms(m, 1, Purpose.RESIDUAL))
    return list(draft_tokens[:m]) + [int(last[0])]


# --- speculative cascades -----------------------------------------------------------------------------

RULE_BASED = ("chow", "diff", "opt")
TOKEN_SPECIFIC = ("v1", "v2", "v3")


def cascade_target(
    p: torch.Tensor,
    q: torch.Tensor,
    rule: str,
    alpha: float,
    p_t: torch.Tensor | None = None,
    q_t: torch.Tensor | None = None,
) -> torch.Tensor:
    """The cascade target π[..., V] (Narasimhan et al. 2025) from untempered p, q and tempered p_t, q_t.

    Rule-based (chow, diff, opt): π = (1 − δ)·q_t + δ·p_t with δ = 0 (keep the draft) iff
    chow: max q ≥ 1 − α; diff: max q ≥ max p − α; opt: max q ≥ max p − α·TV(q, p), TV = Σ max(0, q − p).
    Token-specific (v1, v2, v3): π(v) = q_t(v)·1[v ∈ A] + Q(Aᶜ)·p_t(v) with Q(Aᶜ) = Σ_{u∉A} q_t(u) and
    v1: A = {q(v) ≥ max p − α}; v2: A = {p(v) ≥ max p − α}; v3: A = {p(v) ≥ (1 − α)·max p}.
    ``p_t``/``q_t`` default to ``p``/``q``.
    """
    p_t = p if p_t is None else p_t
    q_t = q if q_t is None else q_t
    if rule in RULE_BASED:
        return torch.where(_keeps_draft(p, q, rule, alpha), q_t, p_t)
    if rule in TOKEN_SPECIFIC:
        accept_set = _acceptance_set(p, q, rule, alpha)
        q_outside = (q_t * ~accept_set).sum(dim=-1, keepdim=True)
        return q_t * accept_set + q_outside * p_t
    raise ValueError(f"unknown cascade rule {rule!r}; expected one of {RULE_BASED + TOKEN_SPECIFIC}")


def verify_cascade(
    logits: torch.Tensor,
    draft: Draft,
    state: SamplerState,
    rule: str,
    alpha: float,
    draft_raw_probs: torch.Tensor | None = None,
    bonus_probs: torch.Tensor | None = None,
) -> list[int]:
    """Verify ``draft`` against the cascade target π instead of p (lossy; tokens = accepted + one more).

    The rules read untempered p (softmax of the penalised logits) and q (``draft_raw_probs``, default
    ``draft.probs``); π mixes the processed p_t and q_t = ``draft.probs`` (one-hot when None). The bonus
    position has no q unless the drafter gives one (``bonus_probs``: its processed q_t there, and a
    ``k + 1``-th row of ``draft_raw_probs``): then the bonus token is drawn from π too, else from p_t.
    """
    pi, q_t, _ = cascade_distributions(logits, draft, state, rule, alpha, draft_raw_probs, bonus_probs)
    return rejection_sample(pi, draft.tokens, q_t, state)


def cascade_distributions(
    logits: torch.Tensor,
    draft: Draft,
    state: SamplerState,
    rule: str,
    alpha: float,
    draft_raw_probs: torch.Tensor | None = None,
    bonus_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(π[k + 1, V], q_t[k, V], kept[k + 1, V]) for :func:`verify_cascade`; ``kept[j, v]`` says whether the
    rule keeps the drafter's distribution for token v at position j (rule-based: δ_j = 0 for every v;
    token-specific: v ∈ A_j), all False at a bonus position without a drafter distribution."""
    _check_inputs(logits, draft)
    k, vocab = len(draft), logits.shape[-1]
    penalised = penalize(logits, state, draft.tokens).float()
    p = penalised.softmax(dim=-1)
    if state.params.greedy:
        p_t = _one_hot(penalised.argmax(dim=-1), vocab)
    else:
        p_t = target_probs(logits, state, draft.tokens)
    if draft.probs is None:
        q_t = _one_hot(torch.tensor(draft.tokens, dtype=torch.long, device=logits.device), vocab)
    else:
        q_t = _match_vocab(draft.probs.float(), vocab)
    q = q_t if draft_raw_probs is None else _match_vocab(draft_raw_probs.float(), vocab)
    rows = k
    if bonus_probs is not None:
        if q.shape[0] != k + 1:
            raise ValueError("a bonus distribution needs k + 1 rows of untempered draft probabilities")
        q_t = torch.cat([q_t, _match_vocab(bonus_probs.float().reshape(1, -1), vocab)])
        rows = k + 1
    pi = cascade_target(p[:rows], q[:rows], rule, alpha, p_t[:rows], q_t)
    kept = _kept(p[:rows], q[:rows], rule, alpha)
    if rows == k:
        pi = torch.cat([pi, p_t[k:]])
        kept = torch.cat([kept, torch.zeros_like(kept[:1])])
    return pi, q_t[:k], kept


def _kept(p: torch.Tensor, q: torch.Tensor, rule: str, alpha: float) -> torch.Tensor:
    if rule in RULE_BASED:
        return _keeps_draft(p, q, rule, alpha).expand_as(q)
    return _acceptance_set(p, q, rule, alpha)


def _keeps_draft(p: torch.Tensor, q: torch.Tensor, rule: str, alpha: float) -> torch.Tensor:
    """bool[..., 1]: δ = 0 (keep the draft distribution) for the rule-based deferral rules."""
    max_q = q.max(dim=-1, keepdim=True).values
    max_p = p.max(dim=-1, keepdim=True).values
    if rule == "chow":
        return max_q >= 1.0 - alpha
    if rule == "diff":
        return max_q >= max_p - alpha
    tv = (q - p).clamp(min=0.0).sum(dim=-1, keepdim=True)
    return max_q >= max_p - alpha * tv


def _acceptance_set(p: torch.Tensor, q: torch.Tensor, rule: str, alpha: float) -> torch.Tensor:
    """bool[..., V]: the tokens the token-specific rule accepts from the draft."""
    max_p = p.max(dim=-1, keepdim=True).values
    if rule == "v1":
        return q >= max_p - alpha
    if rule == "v2":
        return p >= max_p - alpha
    return p >= (1.0 - alpha) * max_p


# --- helpers --------------------------------------------------------------------------------------------


def _check_inputs(logits: torch.Tensor, draft: Draft) -> None:
    k = len(draft)
    if logits.dim() != 2 or logits.shape[0] != k + 1:
        raise ValueError(f"expected logits[{k + 1}, V] for a {k}-token draft, got {tuple(logits.shape)}")
    if draft.probs is not None and (draft.probs.dim() != 2 or draft.probs.shape[0] != k):
        raise ValueError(f"expected draft probs[{k}, V], got {tuple(draft.probs.shape)}")


def _verify_greedy(logits: torch.Tensor, draft_tokens: list[int], state: SamplerState) -> list[int]:
    params = state.params
    if state.grammar is not None and not (params.logit_bias or params.has_penalties) and logits.device.type == "cpu":
        choices = state.grammar.greedy_choices(logits, draft_tokens, argmax_rows(logits))  # masks only where needed
    else:
        choices = argmax_rows(penalize(logits, state, draft_tokens))  # nothing to adjust: one argmax, no copy
    m = _accepted_prefix(choices, draft_tokens)
    return list(draft_tokens[:m]) + [int(choices[m])]


def _verify_one_hot(logits: torch.Tensor, draft_tokens: list[int], state: SamplerState) -> list[int]:
    """On the CPU, without penalties, each row is drawn alone, through the very ops of a one-token decode
    step, and the loop stops at the first sample that differs from the draft: the rows after it are never
    processed, and a row's softmax and cumsum run on data in the core's cache (a 128-token draft over a
    152k vocabulary, all accepted: 58 ms instead of 103 ms for all rows at once on a 2-core Xeon; rejected at
    once: 0.5 ms). All rows go together on a GPU (a loop would wait for the device at every row) and with
    penalties (row j's counts include draft[:j])."""
    if state.rows_see_the_draft or logits.device.type != "cpu":
        p = target_probs(logits, state, draft_tokens)
        samples = sample_inverse_cdf(p, state.uniforms(0, len(logits), Purpose.SAMPLE))
        m = _accepted_prefix(samples, draft_tokens)
        return list(draft_tokens[:m]) + [int(samples[m])]
    for j, expected in enumerate([*draft_tokens, None]):  # None: the bonus row always emits
        p = target_probs(logits[j : j + 1], state)
        token = int(sample_inverse_cdf(p, state.uniforms(j, 1, Purpose.SAMPLE))[0])
        if token != expected:
            return list(draft_tokens[:j]) + [token]
    raise AssertionError("unreachable: the last row always emits a token")


def _accepted_prefix(candidates: torch.Tensor, draft_tokens: Sequence[int]) -> int:
    """Length of the longest prefix where ``candidates[j] == draft_tokens[j]``."""
    k = len(draft_tokens)
    return _leading([c == d for c, d in zip(candidates[:k].tolist(), draft_tokens)])


def _leading(flags: list[bool]) -> int:
    """Number of leading True flags."""
    return next((j for j, flag in enumerate(flags) if not flag), len(flags))


def token_logprobs(logits: torch.Tensor, tokens: list[int], top_n: int | None) -> list[TokenLogprob] | None:
    """Raw logprobs (log_softmax of the unprocessed logits) of the emitted tokens and the ``top_n`` best."""
    if top_n is None:
        return None
    rows = logits[: len(tokens)].float().log_softmax(dim=-1)
    ids = torch.tensor(tokens, dtype=torch.long, device=rows.device)[:, None]
    chosen = rows.gather(1, ids).squeeze(1).tolist()
    if top_n > 0:
        top_values, top_ids = rows.topk(top_n, dim=-1)
        tops = [list(zip(ids, values)) for ids, values in zip(top_ids.tolist(), top_values.tolist())]
    else:
        tops = [[] for _ in tokens]
    return [TokenLogprob(t, lp, top) for t, lp, top in zip(tokens, chosen, tops)]


def _match_vocab(probs: torch.Tensor, vocab: int) -> torch.Tensor:
    """Pad (zeros) or cut draft distributions to the target's vocabulary size."""
    width = probs.shape[-1]
    if width == vocab:
        return probs
    if width > vocab:
        return probs[..., :vocab]
    return torch.nn.functional.pad(probs, (0, vocab - width))


def _one_hot(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(tokens.clamp(max=vocab - 1), vocab).float()
