"""Verification: greedy equals argmax decoding, sampling is exactly p, seeded runs equal plain decoding."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foretell.config import SamplingParams
from foretell.core.draft import EMPTY_DRAFT, Draft
from foretell.core.sampling import Purpose, SamplerState, sample_inverse_cdf, target_probs
from foretell.core.verify import (
    TokenLogprob,
    VerifyResult,
    cascade_target,
    verify,
    verify_cascade,
    verify_greedy_batch,
)

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors: intra-op threads only add contention on a shared machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def forcing_logits(tokens: list[int], vocab: int = 10) -> torch.Tensor:
    """Logits whose row j has its argmax at tokens[j]."""
    logits = torch.zeros(len(tokens), vocab)
    logits[torch.arange(len(tokens)), torch.tensor(tokens)] = 5.0
    return logits


# --- greedy -------------------------------------------------------------------------------------------


def test_greedy_accepts_all_and_adds_the_bonus_token():
    result = verify(forcing_logits([3, 1, 4, 1]), Draft([3, 1, 4]), SamplerState(GREEDY))
    assert result == VerifyResult([3, 1, 4, 1], 3, None)


@pytest.mark.parametrize("j", [0, 1, 2])
def test_greedy_rejects_at_the_first_mismatch(j):
    target = [3, 1, 4, 1]
    draft = [3, 1, 4]
    draft[j] = 9
    result = verify(forcing_logits(target), Draft(draft), SamplerState(GREEDY))
    assert result.tokens == target[: j + 1] and result.num_accepted == j


def test_empty_draft_emits_one_token():
    assert verify(forcing_logits([7]), EMPTY_DRAFT, SamplerState(GREEDY)).tokens == [7]


def test_input_shapes_are_checked():
    with pytest.raises(ValueError):
        verify(torch.zeros(2, 5), Draft([1, 2]), SamplerState(GREEDY))
    with pytest.raises(ValueError):
        verify(torch.zeros(3, 5), Draft([1, 2], probs=torch.ones(3, 5) / 5), SamplerState(GREEDY))


greedy_params = st.builds(
    SamplingParams,
    temperature=st.just(0.0),
    presence_penalty=st.sampled_from([0.0, 1.5]),
    frequency_penalty=st.sampled_from([0.0, 0.8]),
    repetition_penalty=st.sampled_from([1.0, 1.5]),
)


def plain_decode(logits: torch.Tensor, state: SamplerState, steps: int) -> list[int]:
    """Decode one position at a time (row t = logits for output position t), as a plain engine would."""
    state = copy.deepcopy(state)
    out: list[int] = []
    for t in range(steps):
        token = verify(logits[t : t + 1], EMPTY_DRAFT, state).tokens[0]
        state.observe([token])
        out.append(token)
    return out


@settings(max_examples=80, deadline=None)
@given(params=greedy_params, seed=st.integers(0, 2**31), k=st.integers(0, 6), corrupt=st.integers(0, 7))
def test_greedy_verification_equals_argmax_decoding(params, seed, k, corrupt):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(k + 1, 6, generator=generator)
    state = SamplerState(params, prompt_ids=[0, 1], seed=seed)
    state.observe([2, 2])
    expected = plain_decode(logits, state, k + 1)
    draft = list(expected[:k])
    if corrupt < k:
        draft[corrupt] = (draft[corrupt] + 1) % 6
    result = verify(logits, Draft(draft), state)
    m = min(corrupt, k)
    assert result.tokens == expected[: m + 1]
    assert state.position == 2  # not mutated


def test_greedy_batch_matches_single_verification():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 7, generator=generator)
    argmax = logits.argmax(-1).tolist()
    drafts = [argmax[0][:4], argmax[1][:2] + [(argmax[1][2] + 1) % 7], []]
    batched = verify_greedy_batch(logits, drafts)
    for b, draft in enumerate(drafts):
        assert batched[b] == verify(logits[b, : len(draft) + 1], Draft(draft), SamplerState(GREEDY)).tokens
    assert batched[0] == argmax[0] and len(batched[1]) == 3 and len(batched[2]) == 1


# --- sampling: exactly p --------------------------------------------------------------------------------

VOCAB = 6
ROW_LOGITS = torch.tensor(
    [
        [1.2, 0.3, -0.4, 0.9, 0.0, -1.0],
        [0.1, 1.5, 0.2, -0.6, 0.7, -0.2],
        [-0.3, 0.4, 1.1, 0.5, -0.8, 0.6],
    ]
)
DRAFT_Q = torch.tensor(
    [
        [0.05, 0.40, 0.05, 0.10, 0.30, 0.10],  # far from p on purpose
        [0.30, 0.20, 0.10, 0.10, 0.20, 0.10],
    ]
)


def reference_probs(logits: torch.Tensor, params: SamplingParams) -> np.ndarray:
    """An independent float64 model of temperature -> min_p -> top_k -> top_p for one row."""
    x = logits.double().numpy() / params.temperature
    p = np.exp(x - x.max())
    p /= p.sum()
    keep = p >= params.min_p * p.max()
    if params.top_k:
        keep &= x >= np.sort(x[keep])[::-1][min(params.top_k, keep.sum()) - 1]
    p = np.where(keep, p, 0.0)
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    mass_before = np.cumsum(p[order]) - p[order]
    keep_sorted = (mass_before < params.top_p) | (np.arange(len(p)) == 0)
    q = np.zeros_like(p)
    q[order[keep_sorted]] = p[order[keep_sorted]]
    return q / q.sum()


def chi2_critical(df: int, z: float = 3.29) -> float:
    """Upper critical value of χ²(df) at p ≈ 5e-4 (Wilson–Hilferty)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def assert_distributed_as(counts: np.ndarray, expected: np.ndarray) -> None:
    counts, expected = counts.ravel(), expected.ravel()
    support = expected > 0
    assert counts[~support].sum() == 0, "emitted a token the target gives zero probability"
    expected_counts = expected[support] * counts.sum()
    chi2 = float((((counts[support] - expected_counts) ** 2) / expected_counts).sum())
    assert chi2 < chi2_critical(int(support.sum()) - 1), (chi2, counts, expected_counts.round())


def draft_from(q: torch.Tensor, state: SamplerState) -> Draft:
    """What a draft model does: x_j ~ q_j with the DRAFT uniform of position j."""
    tokens = sample_inverse_cdf(q, state.uniforms(0, len(q), Purpose.DRAFT)).tolist()
    return Draft(tokens, probs=q)


PLAIN = SamplingParams(temperature=1.0)
TEMP_TOP_K = SamplingParams(temperature=0.7, top_k=4)
TOP_P_MIN_P = SamplingParams(temperature=1.3, top_p=0.8, min_p=0.1)


@pytest.mark.parametrize(
    "params, drafter",
    [(PLAIN, "one_hot"), (TOP_P_MIN_P, "one_hot"), (PLAIN, "draft_probs"), (TEMP_TOP_K, "draft_probs"),
     (TOP_P_MIN_P, "draft_probs")],
    ids=["one_hot", "one_hot_topp_minp", "draft_probs", "draft_probs_temp_topk", "draft_probs_topp_minp"],
)
def test_first_emitted_token_follows_the_processed_target(params, drafter):
    counts = np.zeros(VOCAB)
    for seed in range(4000):
        state = SamplerState(params, seed=seed)
        draft = Draft([3, 1]) if drafter == "one_hot" else draft_from(DRAFT_Q, state)
        counts[verify(ROW_LOGITS, draft, state).tokens[0]] += 1
    assert_distributed_as(counts, reference_probs(ROW_LOGITS[0], params))


def test_two_tokens_across_steps_are_jointly_exact():
    """Per-position uniforms are reused after a rejection; the emitted pair must still be p0 ⊗ p1."""
    vocab = 4
    logits = ROW_LOGITS[:, :vocab]
    q = DRAFT_Q[:, :vocab] / DRAFT_Q[:, :vocab].sum(-1, keepdim=True)
    params = SamplingParams(temperature=1.0)
    counts = np.zeros((vocab, vocab))
    for seed in range(4000):
        state = SamplerState(params, seed=seed)
        emitted: list[int] = []
        while len(emitted) < 2:
            t = state.position
            draft = draft_from(q[t : t + 2][: 2 - t], state)
            tokens = verify(logits[t : t + len(draft) + 1], draft, state).tokens
            state.observe(tokens)
            emitted += tokens
        counts[emitted[0], emitted[1]] += 1
    p = logits.double().softmax(-1).numpy()
    assert_distributed_as(counts, np.outer(p[0], p[1]))


def test_draft_equal_to_target_is_always_accepted_and_impossible_tokens_never():
    p = ROW_LOGITS[:2].softmax(-1)
    for seed in range(200):
        state = SamplerState(SamplingParams(), seed=seed)
        assert verify(ROW_LOGITS, draft_from(p, state), state).num_accepted == 2
    masked = ROW_LOGITS.clone()
    masked[0, 5] = float("-inf")
    for seed in range(50):
        state = SamplerState(SamplingParams(), seed=seed)
        assert verify(masked, Draft([5, 0], probs=DRAFT_Q), state).num_accepted == 0
        assert verify(masked, Draft([5, 0]), state).num_accepted == 0


# --- seeded sampling equals plain seeded decoding -------------------------------------------------------

seeded_params = st.builds(
    SamplingParams,
    temperature=st.sampled_from([0.6, 1.0, 1.5]),
    top_k=st.sampled_from([0, 4]),
    top_p=st.sampled_from([1.0, 0.9]),
    min_p=st.sampled_from([0.0, 0.05]),
    presence_penalty=st.sampled_from([0.0, 0.8]),
    frequency_penalty=st.sampled_from([0.0, 0.5]),
    repetition_penalty=st.sampled_from([1.0, 1.4]),
    seed=st.integers(0, 2**63),
)


@settings(max_examples=60, deadline=None)
@given(params=seeded_params, data=st.data())
def test_seeded_one_hot_speculation_reproduces_plain_decoding(params, data):
    length, vocab = 24, 8
    logits = torch.randn(length + 40, vocab, generator=torch.Generator().manual_seed(params.seed % 2**31)) * 2
    fresh = SamplerState(params, prompt_ids=[1, 2, 3])
    expected = plain_decode(logits, fresh, length)
    prediction = [t if data.draw(st.booleans()) or i % 3 else (t + 1) % vocab for i, t in enumerate(expected)]
    state = SamplerState(params, prompt_ids=[1, 2, 3])
    produced: list[int] = []
    while len(produced) < length:
        t = state.position
        k = data.draw(st.integers(0, 6))
        draft = Draft(prediction[t : t + k])
        result = verify(logits[t : t + len(draft) + 1], draft, state)
        assert result.tokens[:-1] == draft.tokens[: result.num_accepted]
        state.observe(result.tokens)
        produced += result.tokens
    assert produced[:length] == expected


@pytest.mark.parametrize("params", [SamplingParams(temperature=1.0), SamplingParams(temperature=0.7, top_p=0.9),
                                    SamplingParams(temperature=1.3, top_k=50, min_p=0.01)])
def test_one_hot_rows_drawn_one_by_one_equal_all_rows_drawn_at_once(params):
    """Without penalties the CPU verifier draws one row at a time and stops at the first mismatch; it must
    emit exactly what drawing every row at once (the GPU path, and the path with penalties) emits."""
    vocab, k = 5000, 40
    for seed in range(20):
        logits = torch.randn(k + 1, vocab, generator=torch.Generator().manual_seed(seed)) * 4
        state = SamplerState(params, prompt_ids=[1, 2, 3], seed=seed)
        at_once = sample_inverse_cdf(target_probs(logits, state), state.uniforms(0, k + 1, Purpose.SAMPLE)).tolist()
        cut = seed % (k + 1)  # the draft follows the samples up to `cut`, then differs
        draft = at_once[:cut] + [(t + 1) % vocab for t in at_once[cut:k]]
        result = verify(logits, Draft(draft), state)
        assert result.tokens == at_once[: cut + 1]


# --- logprobs ---------------------------------------------------------------------------------------------


def test_logprobs_are_raw_and_cover_every_emitted_token():
    logits = forcing_logits([3, 1, 4], vocab=6) + torch.arange(6.0) * 0.1
    params = SamplingParams(temperature=0.0, logprobs=2, repetition_penalty=2.0)
    result = verify(logits, Draft([3, 2]), SamplerState(params, prompt_ids=[3]))
    raw = logits.log_softmax(-1)
    assert result.tokens == [3, 1] and len(result.logprobs) == 2
    first = result.logprobs[0]
    assert isinstance(first, TokenLogprob) and first.token_id == 3
    assert first.logprob == pytest.approx(raw[0, 3].item())
    assert [t for t, _ in first.top] == [3, 5] and first.top[0][1] >= first.top[1][1]
    zero_top = verify(logits[:2], Draft([3]), SamplerState(SamplingParams(temperature=0.0, logprobs=0)))
    assert all(entry.top == [] for entry in zero_top.logprobs)
    assert verify(logits, Draft([3, 1]), SamplerState(GREEDY)).logprobs is None


# --- speculative cascades --------------------------------------------------------------------------------

P = torch.tensor([0.6, 0.3, 0.1])
Q = torch.tensor([0.2, 0.7, 0.1])


def test_rule_based_cascade_targets():
    assert torch.equal(cascade_target(P, Q, "chow", alpha=0.3), Q)  # max q 0.7 >= 1 - 0.3
    assert torch.equal(cascade_target(P, Q, "chow", alpha=0.2), P)
    assert torch.equal(cascade_target(P, Q, "diff", alpha=0.0), Q)  # 0.7 >= 0.6
    sharper_p = torch.tensor([0.8, 0.1, 0.1])
    assert torch.equal(cascade_target(sharper_p, Q, "diff", alpha=0.05), sharper_p)
    # OPT: TV(q, p) = 0.5 ; keep iff 0.7 >= 0.8 - 0.5 alpha
    assert torch.equal(cascade_target(sharper_p, Q, "opt", alpha=0.2), Q)
    assert torch.equal(cascade_target(sharper_p, Q, "opt", alpha=0.1), sharper_p)


def test_token_specific_cascade_targets():
    # v3 with alpha 0.5: A = {p >= 0.3} = {0, 1}; Q(A^c) = 0.1 -> pi = q·1_A + 0.1 p
    pi = cascade_target(P, Q, "v3", alpha=0.5)
    assert torch.allclose(pi, torch.tensor([0.2 + 0.06, 0.7 + 0.03, 0.01]))
    # v2 with alpha 0.35: A = {p >= 0.25} = {0, 1}: the same set
    assert torch.allclose(cascade_target(P, Q, "v2", alpha=0.35), pi)
    # v1 with alpha 0.0: A = {q >= 0.6} = {1}; Q(A^c) = 0.3
    assert torch.allclose(cascade_target(P, Q, "v1", alpha=0.0), torch.tensor([0.18, 0.7 + 0.09, 0.03]))
    with pytest.raises(ValueError):
        cascade_target(P, Q, "nope", alpha=0.1)


@pytest.mark.parametrize("rule", ["v1", "v2", "v3"])
def test_token_specific_acceptance_rate_formula(rule):
    generator = torch.Generator().manual_seed(3)
    p = torch.randn(5, 7, generator=generator).softmax(-1)
    q = torch.randn(5, 7, generator=generator).softmax(-1)
    pi = cascade_target(p, q, rule, alpha=0.2)
    assert torch.allclose(pi.sum(-1), torch.ones(5))
    max_p = p.max(-1, keepdim=True).values
    accept_set = {"v1": q >= max_p - 0.2, "v2": p >= max_p - 0.2, "v3": p >= 0.8 * max_p}[rule]
    q_out = (q * ~accept_set).sum(-1, keepdim=True)
    formula = (q * accept_set).sum(-1) + torch.minimum(q, q_out * p).mul(~accept_set).sum(-1)
    assert torch.allclose(torch.minimum(q, pi).sum(-1), formula)


def test_cascade_that_always_defers_is_exact_speculative_decoding():
    params = SamplingParams(temperature=0.8)
    for seed in range(300):
        state = SamplerState(params, seed=seed)
        draft = draft_from(DRAFT_Q, state)
        exact = verify(ROW_LOGITS, draft, state).tokens
        assert verify_cascade(ROW_LOGITS, draft, state, "chow", alpha=0.0) == exact  # max q < 1: δ = 1


def test_cascade_keeping_the_draft_accepts_it_whole():
    for seed in range(50):
        state = SamplerState(SamplingParams(), seed=seed)
        draft = draft_from(DRAFT_Q, state)
        assert verify_cascade(ROW_LOGITS, draft, state, "chow", alpha=1.0)[:2] == draft.tokens
        one_hot = Draft([4, 4])
        assert verify_cascade(ROW_LOGITS, one_hot, state, "diff", alpha=0.0)[:2] == [4, 4]
