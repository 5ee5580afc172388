"""Adaptive k: cost model, acceptance tracking, the choice of k on perfect, garbage and stationary drafts."""

from __future__ import annotations

import random

import numpy as np
import pytest

from foretell.config import ConfigError
from foretell.core.adaptive_k import AcceptanceTracker, AttentionCost, CostModel, choose_k, expected_tokens, optimal_k

FLAT = CostModel({1: 1.0, 2: 1.01, 8: 1.03, 32: 1.2, 64: 1.52, 128: 2.3})  # 0.5B model on this CPU
STEEP = CostModel({2: 1.3, 8: 2.4, 64: 12.0})  # llama.cpp-like verify cost


def test_cost_model_interpolates_and_extrapolates():
    assert FLAT.ratio(1) == 1.0 and FLAT.ratio(64) == 1.52
    assert FLAT.ratio(16) == pytest.approx(1.03 + (1.2 - 1.03) * 8 / 24)
    assert FLAT.ratio(192) == pytest.approx(2.3 + (2.3 - 1.52))
    assert STEEP.ratio(1) == 1.0  # n = 1 is implied
    assert np.allclose(FLAT.ratios(np.array([1, 2, 64])), [1.0, 1.01, 1.52])


@pytest.mark.parametrize("points", [{2: 0.9}, {0: 1.0, 4: 1.1}, {1: 1.0}, {4: float("nan")}])
def test_cost_model_validation(points):
    with pytest.raises(ConfigError):
        CostModel(points)


def test_expected_tokens_formula():
    assert expected_tokens(0.5, 3) == pytest.approx((1 - 0.5**4) / 0.5)
    assert expected_tokens(1.0, 7) == 8
    assert expected_tokens(0.0, 5) == 1


def test_optimal_k_is_monotone_in_alpha():
    for cost in (FLAT, STEEP):
        ks = [optimal_k(a, cost, 256) for a in np.linspace(0, 1, 101)]
        assert ks == sorted(ks)
        assert ks[0] == 0 and ks[-1] >= 255  # (a tie within rounding at the far end of a linear cost)
    assert optimal_k(0.9, FLAT, 0) == 0


def simulate(accepted_fn, cost, steps, k_max=256, seed=0, tracker=None):
    """Run the policy: returns the chosen ks and the time per emitted token relative to plain decoding."""
    rng = random.Random(seed)
    tracker = tracker or AcceptanceTracker()
    ks, tokens, time = [], 0, 0.0
    for step in range(steps):
        k = choose_k(tracker, cost, k_max, available=1 << 30)
        accepted = accepted_fn(rng, k, step)
        tracker.record(k, accepted)
        ks.append(k)
        tokens += accepted + 1
        time += cost.ratio(k + 1)
    return ks, time / tokens


def geometric(alpha):
    def accepted(rng, k, step):
        n = 0
        while n < k and rng.random() < alpha:
            n += 1
        return n

    return accepted


def test_perfect_predictions_grow_k_to_64_within_a_few_steps():
    ks, _ = simulate(lambda rng, k, step: k, FLAT, steps=6)
    assert ks[0] > 0 and max(ks[:3]) >= 64 and ks[-1] == 256
    assert ks == sorted(ks)


@pytest.mark.parametrize("cost", [FLAT, STEEP], ids=["flat", "steep"])
def test_garbage_predictions_cost_at_most_two_percent(cost):
    ks, relative_time = simulate(lambda rng, k, step: 0, cost, steps=600)
    assert relative_time <= 1.02
    tail = ks[-300:]
    assert sum(1 for k in tail if k) <= 10 and max(tail) <= 2  # rare tiny probes only


def test_a_probe_that_succeeds_brings_speculation_back():
    tracker = AcceptanceTracker()
    simulate(lambda rng, k, step: 0, FLAT, steps=400, tracker=tracker)
    ks, _ = simulate(lambda rng, k, step: k, FLAT, steps=80, tracker=tracker)
    first_probe = next(i for i, k in enumerate(ks) if k)
    assert first_probe < 65 and max(ks[first_probe : first_probe + 4]) >= 64


def test_a_rejection_after_a_long_exact_run_shrinks_k_fast():
    ks, _ = simulate(lambda rng, k, step: k if step < 10 else 0, FLAT, steps=14)
    assert ks[9] == 256 and max(ks[12:]) <= 8


@pytest.mark.parametrize("alpha", [0.2, 0.5, 0.8, 0.95])
@pytest.mark.parametrize("cost", [FLAT, STEEP], ids=["flat", "steep"])
def test_stationary_acceptance_is_close_to_the_best_fixed_k(alpha, cost):
    best = max(expected_tokens(alpha, k) / cost.ratio(k + 1) for k in range(257))
    rates = [1.0 / simulate(geometric(alpha), cost, steps=200, seed=s)[1] for s in range(3)]
    assert np.mean(rates) >= 0.85 * best and np.mean(rates) >= 0.98  # near the oracle, never much below plain


def test_more_acceptance_never_proposes_less():
    chosen = []
    for accepted in range(11):
        tracker = AcceptanceTracker()
        for _ in range(5):
            tracker.record(10, accepted)
        chosen.append(choose_k(tracker, FLAT, 256, 1 << 30))
    assert chosen == sorted(chosen) and chosen[-1] > chosen[0]
    alphas = []
    for accepted in range(11):
        tracker = AcceptanceTracker()
        tracker.record(10, accepted)
        alphas.append(tracker.alpha)
    assert alphas == sorted(alphas)


def test_limits_cap_available_and_k_max():
    tracker = AcceptanceTracker()
    for _ in range(5):
        tracker.record(64, 64)
    assert choose_k(tracker, FLAT, k_max=256, available=1 << 30) >= 128
    assert choose_k(tracker, FLAT, k_max=256, available=1 << 30, cap=8) == 8
    assert choose_k(tracker, FLAT, k_max=256, available=5) == 5
    assert choose_k(tracker, FLAT, k_max=0, available=100) == 0


def test_soften_reset_and_validation():
    tracker = AcceptanceTracker()
    initial = tracker.alpha
    for _ in range(4):
        tracker.record(32, 32)
    high = tracker.alpha
    tracker.soften(0.25)
    assert initial < tracker.alpha < high
    tracker.reset()
    assert tracker.alpha == pytest.approx(initial) and tracker.idle_steps == 0
    with pytest.raises(ValueError):
        tracker.record(3, 4)
    with pytest.raises(ConfigError):
        AcceptanceTracker(hazard=1.0)
    with pytest.raises(ConfigError):
        AcceptanceTracker(prior_alpha=0.0)


def test_the_cost_table_and_the_expected_tokens_kept_between_steps_equal_their_formulas():
    """The policy prices every draft size of every source at every step: the cost curve is read from a table
    (grown past its first 1,024 sizes on demand) and E(0..n) is computed once per belief. Both must equal
    what the formulas give, and the belief's E must follow every change of the belief."""
    cost = CostModel({2: 1.1, 16: 1.5, 64: 3.0})
    ns = np.arange(0, 5000, dtype=np.float64)
    assert np.array_equal(cost.span(0, 5000), cost.ratios(ns))  # past the first table, so it grew
    assert np.array_equal(cost.span(7, 3), cost.ratios(np.array([7.0, 8.0, 9.0])))
    assert cost.ratio(40) == cost.ratio(40.0) == float(cost.ratios(np.array([40.0]))[0])
    assert cost.ratio(2.5) == pytest.approx(1.1 + 0.5 * 0.4 / 14)
    with pytest.raises(TypeError):
        cost.span(1.5, 2)
    assert not cost.span(1, 4).flags.writeable  # a view of the table: no caller can change the curve

    def direct(tracker, limit):
        return np.cumsum(tracker.weights @ tracker.grid[:, None] ** np.arange(limit + 1))

    tracker = AcceptanceTracker()
    for change in (lambda: None, lambda: tracker.record(8, 8), lambda: tracker.record(8, 2),
                   lambda: tracker.soften(0.25), tracker.reset):
        change()
        for limit in (0, 3, 64, 200):
            assert np.allclose(tracker.expected_tokens(limit), direct(tracker, limit), rtol=1e-12, atol=0)
    assert not tracker.expected_tokens(5).flags.writeable


def test_batch_aware_choice_stops_speculating_when_passes_are_compute_bound():
    """Alone, a fairly good draft pays; in a pass that already holds many tokens of a linear (compute-bound)
    cost curve, every rejected token slows everybody down, so k drops; with a flat curve it stays."""
    tracker = AcceptanceTracker()
    for _ in range(10):
        tracker.record(8, 5)
    linear = CostModel({1: 1.0, 64: 64.0})
    flat = CostModel({1: 1.0, 512: 1.5})
    alone = choose_k(tracker, flat, 64, 64)
    assert alone > 0
    assert choose_k(tracker, linear, 64, 64, batch_tokens=32, batch_expected=32.0) == 0
    assert choose_k(tracker, flat, 64, 64, batch_tokens=32, batch_expected=32.0) > 0


def test_short_curve_is_not_extrapolated_flat():
    """A curve measured only up to 8 tokens (a busy machine) must not make 128-token drafts look free."""
    short = CostModel({2: 2.0, 4: 2.0, 8: 2.0})
    assert short.ratio(32) == 2.0 and short.ratio(128) == 2.0 + 2.0 / 8 * (128 - 32)
    tracker = AcceptanceTracker()
    for _ in range(5):
        tracker.record(16, 8)  # about half of each draft accepted
    assert choose_k(tracker, short, k_max=128, available=1 << 30) <= 32
    steep = CostModel({2: 1.47, 8: 1.81, 32: 3.42, 64: 6.1, 128: 10.4})  # measured: the last segment decides
    assert abs(steep.ratio(256) - (10.4 + (10.4 - 6.1) / 64 * 128)) < 1e-9


def test_a_draft_beside_a_prompt_chunk_pays_for_its_own_time():
    """Measured on the real-edit bench (AMD EPYC, fp32): beside a 337-token prompt, a 128-token draft from an
    unproven prediction looked nearly free relative to the whole pass (25.4 vs 18.8 one-token passes) and
    was chosen, then rejected (the reply opened with a code fence): a second of time to first token on every
    request. The draft's extra time must buy tokens at the rate the request gets alone."""
    epyc_fp32 = CostModel({2: 1.30, 8: 1.30, 16: 1.46, 32: 2.14, 64: 4.47, 128: 7.72, 256: 14.44})
    unproven = AcceptanceTracker(prior_alpha=0.6)
    beside_prompt = choose_k(unproven, epyc_fp32, k_max=128, available=400, batch_tokens=336)
    alone = choose_k(unproven, epyc_fp32, k_max=128, available=400)
    assert 0 < beside_prompt <= 16 and 0 < alone <= 16
    old_score = unproven.expected_tokens(128) / epyc_fp32.ratios(336 + np.arange(129) + 1)
    assert int(np.argmax(old_score)) == 128  # what the whole-pass throughput criterion picked
    proven = AcceptanceTracker(prior_alpha=0.6)
    for _ in range(6):
        proven.record(31, 31)
    assert choose_k(proven, epyc_fp32, k_max=128, available=400, batch_tokens=336) >= 24  # a proven source still drafts


# The 0.5B in fp32 on a 2-core Cascade Lake Xeon, passes after 256 keys (ms: 1 token 27.4, 16 tokens 58.2, 64
# tokens 185.4) and after 4,096 (37.2, 104.7, 334.9), all sizes and contexts interleaved in rounds.
XEON_256 = {2: 1.113, 4: 1.204, 8: 1.558, 16: 2.124, 32: 3.398, 64: 6.766}


def test_a_pass_after_more_keys_is_priced_with_their_attention():
    model = CostModel(XEON_256, AttentionCost(per_pass=8.6e-5, per_token=2.1e-5, reference=256))
    assert model.at(0) is model and model.at(256) is model and CostModel(XEON_256).at(9000) is not None
    far = model.at(4096)
    assert far.ratio(1) == pytest.approx(37.2 / 27.4, rel=0.05)
    assert far.ratio(16) == pytest.approx(104.7 / 27.4, rel=0.05)
    assert far.ratio(64) == pytest.approx(334.9 / 27.4, rel=0.05)
    np.testing.assert_allclose(far.span(3, 70), far.ratios(np.arange(3, 73)))
    np.testing.assert_allclose(far.span(3, 70), [far.ratio(n) for n in range(3, 73)])
    with pytest.raises(ConfigError):
        AttentionCost(per_token=-1e-5)


def test_a_dear_attention_shortens_drafts_at_long_contexts_only():
    """Each draft token attends to every cached key: where that is dear (here 1e-3 of a one-token pass a key),
    a long reply's drafts get shorter as it grows; with the attention free the context changes nothing."""
    tracker = AcceptanceTracker(prior_alpha=0.9, prior_weight=200)
    dear = CostModel(XEON_256, AttentionCost(per_token=1e-3))
    free = CostModel(XEON_256)
    ks = [choose_k(tracker, dear.at(context), 64, 64) for context in (0, 1024, 4096)]
    assert ks[0] > ks[1] > ks[2] >= 1
    assert [choose_k(tracker, free.at(context), 64, 64) for context in (0, 1024, 4096)] == [ks[0]] * 3
