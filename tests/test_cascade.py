"""Speculative cascades: the π the sampled tokens follow, α's limits, and opt-in only.

Rules read untempered p, q; sampling uses tempered p_t, q_t. π is recomputed here from the paper's
definitions (REFERENCE.md §2), not with the code under test.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from foretell.config import ConfigError, SamplingParams, SpeculationParams
from foretell.core.sampling import Purpose, SamplerState, sample_inverse_cdf
from foretell.engine.drafter import ModelDraft, verify_step
from test_drafter import (
    GREEDY, PROMPTS, chi_square, chi_square_threshold, draft_request, hf_greedy, make_engine, tokens_of,
)

RULES = ("chow", "diff", "opt", "v1", "v2", "v3")


def expected_pi(lp: torch.Tensor, lq: torch.Tensor, temperature: float, rule: str, alpha: float) -> torch.Tensor:
    """π for one position straight from the definitions (untempered p, q decide; p_t, q_t are mixed)."""
    p, q = lp.softmax(-1), lq.softmax(-1)
    p_t, q_t = (lp / temperature).softmax(-1), (lq / temperature).softmax(-1)
    if rule in ("chow", "diff", "opt"):
        tv = sum(max(0.0, float(a - b)) for a, b in zip(q, p))
        threshold = {"chow": 1 - alpha, "diff": float(p.max()) - alpha, "opt": float(p.max()) - alpha * tv}[rule]
        return q_t if float(q.max()) >= threshold else p_t
    keep = {
        "v1": [float(x) >= float(p.max()) - alpha for x in q],
        "v2": [float(x) >= float(p.max()) - alpha for x in p],
        "v3": [float(x) >= (1 - alpha) * float(p.max()) for x in p],
    }[rule]
    outside = sum(float(q_t[v]) for v in range(len(q)) if not keep[v])
    return torch.tensor([float(q_t[v]) * keep[v] + outside * float(p_t[v]) for v in range(len(q))])


def cascade_draft(lq: torch.Tensor, state: SamplerState, k: int, rule: str, alpha: float) -> ModelDraft:
    """k draft tokens sampled from q_t (the same q at every position) with the DRAFT uniforms."""
    q_t = (lq / state.params.temperature).softmax(-1)
    tokens = sample_inverse_cdf(q_t.expand(k, -1), state.uniforms(0, k, Purpose.DRAFT)).tolist()
    raw = lq.softmax(-1).expand(k + 1, -1)
    return ModelDraft(tokens, q_t.expand(k, -1), "draft", raw, q_t, (rule, alpha))


@pytest.mark.parametrize("rule, alpha", [("chow", 0.45), ("diff", 0.2), ("opt", 0.6), ("v1", 0.1), ("v2", 0.2),
                                         ("v3", 0.5)])
def test_sampled_tokens_follow_pi(rule, alpha):
    gen = torch.Generator().manual_seed(11)
    lp, lq = torch.randn(5, generator=gen) * 1.5, torch.randn(5, generator=gen) * 1.5
    temperature = 0.7
    pi = expected_pi(lp, lq, temperature, rule, alpha)
    p_t = (lp / temperature).softmax(-1)
    logits = lp.expand(3, -1)  # two draft positions + the bonus, same p everywhere
    n = 1500
    first, bonus = Counter(), Counter()
    for seed in range(n):
        state = SamplerState(SamplingParams(temperature=temperature), seed=seed)
        result, _ = verify_step(logits, cascade_draft(lq, state, 2, rule, alpha), state)
        first[result.tokens[0]] += 1
        if result.num_accepted == 2:
            bonus[result.tokens[2]] += 1
    stat, df = chi_square(first, {v: float(pi[v]) for v in range(5)}, n)
    assert stat < chi_square_threshold(df), (rule, stat)
    m = sum(bonus.values())
    stat, df = chi_square(bonus, {v: float(pi[v]) for v in range(5)}, m)  # the bonus row is drawn from π too
    assert stat < chi_square_threshold(df), (rule, stat)
    if (pi - p_t).abs().sum() > 0.2:  # the test tells π from the target's own distribution
        stat, df = chi_square(first, {v: float(p_t[v]) for v in range(5)}, n)
        assert stat > chi_square_threshold(df)


@pytest.fixture(scope="module")
def tokenizer():
    from foretell.testing import make_tiny_tokenizer

    return make_tiny_tokenizer()


@pytest.fixture(scope="module")
def models():
    from foretell.testing import make_tiny_model
    from test_drafter import noisy_copy

    target = make_tiny_model(seed=1)
    return target, noisy_copy(target, 0.5, seed=7)


@pytest.fixture(scope="module")
def references(models, tokenizer):
    """(prompt, target's greedy output, drafter's greedy output) for two prompts, 24 tokens."""
    target, drafter = models
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompts = [tokenizer.encode(t) for t in PROMPTS[:2]]
    refs = [(p, hf_greedy(target, p, 24, eos), hf_greedy(drafter, p, 24, eos)) for p in prompts]
    assert all(t != d for _, t, d in refs)  # the limits are distinguishable
    return refs


@pytest.mark.parametrize("rule", RULES)
def test_alpha_limits_are_speculative_decoding_and_the_drafter_alone(models, tokenizer, references, rule):
    engine = make_engine(*models, tokenizer)
    exact = [draft_request(p, 24, method="cascade", rule=rule, alpha=-1.0) for p, _, _ in references]
    loose = [draft_request(p, 24, method="cascade", rule=rule, alpha=1.0) for p, _, _ in references]
    got = tokens_of(engine, exact + loose)
    for (_, target_out, drafter_out), e, l in zip(references, exact, loose):
        assert got[e.request_id] == target_out
        assert got[l.request_id] == drafter_out


def test_a_cascade_is_applied_only_when_asked_for(models, tokenizer):
    target, drafter = models
    engine = make_engine(target, drafter, tokenizer)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompt = tokenizer.encode("class Snake:")
    plain = draft_request(prompt, 30, method="auto")
    drafted = draft_request(prompt, 30, method="draft")
    cascade = draft_request(prompt, 30, method="cascade", rule="chow", alpha=1.0)
    outs = engine.generate([plain, drafted, cascade])  # one batch
    got = {rid: [t for o in chunks for t in o.new_token_ids] for rid, chunks in outs.items()}
    reference = hf_greedy(target, prompt, 30, eos)
    assert got[plain.request_id] == reference and got[drafted.request_id] == reference
    assert got[cascade.request_id] == hf_greedy(drafter, prompt, 30, eos) != reference
    stats = {rid: chunks[-1].stats for rid, chunks in outs.items()}
    assert stats[plain.request_id].cascade_drafter_tokens == 0
    assert stats[drafted.request_id].cascade_drafter_tokens == 0
    assert stats[cascade.request_id].cascade_drafter_tokens == stats[cascade.request_id].completion_tokens


def test_greedy_cascades_in_between_are_deterministic(models, tokenizer):
    target, drafter = models
    engine = make_engine(target, drafter, tokenizer)
    prompt = tokenizer.encode("for i in range(10):")
    reqs = [draft_request(prompt, 40, method="cascade", rule="diff", alpha=0.1) for _ in range(2)]
    got = tokens_of(engine, reqs)
    assert got[reqs[0].request_id] == got[reqs[1].request_id]


def test_cascade_parameters_are_validated():
    with pytest.raises(ConfigError) as err:
        SpeculationParams(method="draft", rule="v3")
    assert err.value.field == "rule"
    with pytest.raises(ConfigError) as err:
        SpeculationParams(method="cascade", alpha=1.5)
    assert err.value.field == "alpha"
    with pytest.raises(ConfigError) as err:
        SpeculationParams(method="cascade", rule="v9")
    assert err.value.field == "rule"
    with pytest.raises(ConfigError) as err:
        SpeculationParams(method="magic")
    assert err.value.field == "method"
    spec = SpeculationParams(method="cascade")
    assert (spec.cascade_rule, spec.cascade_alpha) == ("v3", 0.5)
    assert GREEDY.greedy


def test_a_shortened_draft_keeps_pi_at_its_bonus_position(models, tokenizer, references):
    """With adaptive k the engine may verify fewer tokens than were drafted: the next drafted position's q
    becomes the bonus row, so α = 1 still reproduces the drafter alone and α = -1 the expert."""
    engine = make_engine(*models, tokenizer, adaptive_k=True, k_max=2)
    prompt, target_out, drafter_out = references[0]
    loose = draft_request(prompt, 24, method="cascade", rule="v3", alpha=1.0)
    exact = draft_request(prompt, 24, method="cascade", rule="opt", alpha=-1.0)
    got = tokens_of(engine, [loose, exact])
    assert got[loose.request_id] == drafter_out and got[exact.request_id] == target_out
    draft = ModelDraft([1, 2, 3], torch.eye(5)[:3], "draft", torch.eye(5)[:4], torch.eye(5)[3], ("v3", 0.5))
    short = draft.truncated(1)
    assert short.tokens == [1] and torch.equal(short.bonus_probs, torch.eye(5)[1])
    assert short.raw_probs.shape == (2, 5)
