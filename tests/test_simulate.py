"""Pass-counting simulator, oracle, baselines, and the edit-pair corpus."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foretell.bench.corpus import RegexTokenizer, build_corpus, tokenize_corpus
from foretell.core.draft import Draft, Proposer
from foretell.core.prediction import PredictionProposer
from foretell.core.simulate import (
    FirstDivergenceProposer,
    LineBasedProposer,
    SimResult,
    SuffixAutomaton,
    cheapest_copy,
    compare,
    copy_oracle,
    copy_runs,
    efficiency,
    newline_ids,
    oracle,
    simulate,
    simulate_policy,
)
from foretell.config import SpeculationParams
from foretell.core.adaptive_k import AttentionCost, CostModel
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import make_proposer

FAST = settings(max_examples=60, deadline=None)
seqs = st.lists(st.integers(0, 6), max_size=80)


def brute_longest_match(pred: list[int], out: list[int], pos: int) -> int:
    best = 0
    for i in range(len(pred)):
        n = 0
        while i + n < len(pred) and pos + n < len(out) and pred[i + n] == out[pos + n]:
            n += 1
        best = max(best, n)
    return best


def optimal_passes(pred: list[int], out: list[int], k: int) -> int:
    """Dynamic programming over all draft choices (any prefix of a match is a match)."""

    @functools.lru_cache(maxsize=None)
    def best(pos: int) -> int:
        if pos >= len(out):
            return 0
        reach = min(k, brute_longest_match(pred, out, pos))
        return 1 + min(best(pos + a + 1) for a in range(reach + 1))

    return best(0)


@FAST
@given(seqs, seqs, st.integers(0, 80))
def test_suffix_automaton_longest_match(pred, out, pos):
    pos = min(pos, len(out))
    assert SuffixAutomaton(pred).longest_match(out, pos) == brute_longest_match(pred, out, pos)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=25), st.lists(st.integers(0, 3), max_size=25), st.integers(1, 6))
def test_greedy_oracle_is_optimal(pred, out, k):
    assert oracle(pred, out, k).passes == optimal_passes(pred, out, k)


@FAST
@given(seqs, seqs, st.integers(1, 40))
def test_no_proposer_beats_the_oracle(pred, out, k):
    best = oracle(pred, out, k)
    text = lambda t: "x\n" if t == 0 else "y"  # noqa: E731
    cmp = compare(pred, out, lambda: PredictionProposer(pred, newline_ids={0}), k, text)
    for result in (cmp.ours, cmp.first_divergence, cmp.line_based):
        assert result.passes >= best.passes
        assert result.accepted <= result.proposed
        assert 0.0 <= efficiency(best, result) <= 1.0
    assert cmp.efficiency == best.passes / cmp.ours.passes if out else cmp.efficiency == 1.0


@FAST
@given(seqs, st.integers(1, 64))
def test_perfect_prediction_takes_oracle_passes(pred, k):
    ours = simulate(PredictionProposer(pred), pred, k)
    assert ours.passes == oracle(pred, pred, k).passes
    assert ours.accepted + ours.passes >= len(pred)  # every token but one per pass came from the draft
    assert ours.proposed - ours.accepted <= k  # only the last draft may overrun the output


def test_passes_and_acceptance_example():
    pred, out = [1, 2, 3, 4], [1, 2, 9, 3, 4]
    assert oracle(pred, out, 8) == SimResult(passes=2, proposed=4, accepted=4, output_len=5)
    first = simulate(FirstDivergenceProposer(pred), out, 8)
    assert first.passes == 3 and first.accepted == 2 and first.acceptance_rate == 0.5
    assert efficiency(oracle(pred, out, 8), first) == pytest.approx(2 / 3)


def test_first_divergence_proposes_nothing_after_a_mismatch():
    baseline = FirstDivergenceProposer([1, 2, 3, 4, 5])
    baseline.observe([1, 9])
    assert baseline.propose(8).tokens == []
    baseline.observe([3, 4])  # even when the output comes back
    assert baseline.propose(8).tokens == []


def test_line_based_resumes_after_a_matching_line():
    words = ["a = 1\n", "b = 2\n", "c = 3\n", "d = 4\n"]
    vocab = {w: i for i, w in enumerate(words + ["b = 20\n"])}
    text = {i: w for w, i in vocab.items()}.__getitem__
    pred = [vocab[w] for w in words]
    baseline = LineBasedProposer(pred, text)
    baseline.observe([vocab["a = 1\n"], vocab["b = 20\n"]])
    assert baseline.propose(8).tokens == []  # "b = 20" matches no line
    baseline.observe([vocab["c = 3\n"]])
    assert baseline.propose(8).tokens == [vocab["d = 4\n"]]


def test_simulate_rejects_drafts_longer_than_k():
    class Greedy(Proposer):
        def propose(self, k: int) -> Draft:
            return Draft([0] * (k + 1))

        def observe(self, tokens) -> None:
            pass

    with pytest.raises(ValueError):
        simulate(Greedy(), [0, 0, 0], 2)


def test_k_policy_callable():
    pred = list(range(100))
    calls = []

    def policy(proposer: Proposer) -> int:
        calls.append(proposer.available())
        return 10

    result = simulate(PredictionProposer(pred), pred, policy)
    assert result.passes == 10 and calls[0] == 100


def test_oracle_min_match_ignores_short_matches():
    pred, out = [1, 2, 3], [7, 1, 8, 2, 3]
    assert oracle(pred, out, 8).passes == 3  # "7", "1 8", "2 3"
    assert oracle(pred, out, 8, min_match=2).passes == 4  # 1 alone is not proposed


def test_newline_ids():
    assert newline_ids([1, 2, 3, 2], {1: "a", 2: ")\n", 3: "\n\n"}.__getitem__) == {2, 3}


# ------------------------------------------------------------------------------------------ corpus


@pytest.fixture(scope="module")
def corpus():
    return build_corpus()


def test_corpus_has_enough_varied_pairs(corpus):
    assert len(corpus) >= 30
    kinds = {pair.kind for pair in corpus}
    assert {"add_docstring", "add_type_hints", "add_logging", "rename", "extract_helper", "rewrite_loop",
            "comment_block", "delete_block", "move_function", "insert_top", "reorder"} <= kinds
    assert len({pair.name for pair in corpus}) == len(corpus)
    assert all(pair.prediction != pair.output for pair in corpus)


def test_corpus_tokenizes_losslessly(corpus):
    tokenizer = RegexTokenizer()
    pairs = tokenize_corpus(corpus, tokenizer)
    for raw, tok in zip(corpus, pairs):
        assert tokenizer.decode(tok.prediction_ids) == raw.prediction
        assert tokenizer.decode(tok.output_ids) == raw.output
    assert tokenizer.decode(tokenizer.encode("foo_bar(x)\n")) == "foo_bar(x)\n"
    assert [tokenizer.token_text(i) for i in tokenizer.encode("foo_bar(x)\n")] == ["foo", "_bar", "(x", ")\n"]
    plain = tokenize_corpus(corpus[:1], lambda text: [len(text)])
    assert plain[0].prediction_ids == (len(corpus[0].prediction),)


def test_corpus_pairs_beat_the_baselines_on_average(corpus):
    tokenizer = RegexTokenizer()
    ours, first = [], []
    for pair in tokenize_corpus(corpus, tokenizer):
        p, o = pair.prediction_ids, pair.output_ids
        cmp = compare(p, o, lambda: PredictionProposer(p), 64, tokenizer.token_text)
        ours.append(cmp.efficiency)
        first.append(cmp.first_divergence_efficiency)
    assert sum(ours) / len(ours) > 0.7 > 0.2 > sum(first) / len(first)


# A CPU-like curve: short passes cheap, long ones compute-bound (the 1.5B's on a 2-core Zen 4, rounded).
CURVE = CostModel({2: 1.11, 4: 1.3, 8: 1.78, 16: 2.26, 32: 3.63, 64: 7.08, 128: 13.03})


def cheapest_by_search(runs: list[int], cost: CostModel, min_run: int) -> float:
    """Every chain of drafts, searched exhaustively (no shared subproblems assumed)."""

    def best(pos: int) -> float:
        if pos >= len(runs):
            return 0.0
        reach = runs[pos] if runs[pos] >= min_run else 0
        return min(cost.ratio(d + 1) + best(pos + d + 1) for d in range(min(reach, len(runs) - 1 - pos) + 1))

    return best(0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=14), st.lists(st.integers(0, 3), max_size=14), st.integers(1, 3))
def test_cheapest_copy_is_the_least_cost_of_every_draft_chain(pred, out, min_run):
    runs = copy_runs([pred], out, 64)
    assert all(r == max(brute_longest_match(pred, out, i), brute_longest_match(out[:i], out, i)) for i, r in
               enumerate(runs))
    bound = cheapest_copy(runs, CURVE, min_run)
    assert bound.cost == pytest.approx(cheapest_by_search(runs, CURVE, min_run))
    assert bound.passes <= len(out)
    assert copy_oracle([pred], out, 64).passes <= bound.passes  # the fewest passes; the bound counts cost


@FAST
@given(seqs, seqs)
def test_no_policy_decodes_for_less_than_the_copy_bound(pred, out):
    prompt = [7, 8] + pred + [9]
    runs = copy_runs([pred, prompt], out, 128)
    bound = cheapest_copy(runs, CURVE)
    for method in ("auto", "ngram"):
        spec = SpeculationParams(prediction=tuple(pred) if method == "auto" and pred else None, method=method)
        result = simulate_policy(DraftPolicy(make_proposer(prompt, spec), CURVE), out)
        assert result.cost >= bound.cost - 1e-9
    assert cheapest_copy(runs, CURVE, min_run=4).cost >= bound.cost - 1e-9  # fewer choices never cost less


def test_cheapest_copy_prices_passes_not_counts_them():
    """Where a pass of 9+ tokens costs far more than one of 8 (a cliff, as on some GPUs), the cheapest decode
    of a 17-token copy takes three short passes, not the one long pass of the fewest-passes oracle; new text (no
    copyable run) costs one pass a token."""
    cliff = CostModel({8: 1.05, 9: 3.0, 32: 3.5})
    out = list(range(17))
    runs = copy_runs([out], out, 128)
    bound = cheapest_copy(runs, cliff)
    assert copy_oracle([out], out, 128).passes == 1
    assert bound.passes == 3 and bound.cost == pytest.approx(2 * cliff.ratio(8) + 1.0)
    assert bound.cost < cliff.ratio(17)  # one pass over all 17
    assert cheapest_copy(copy_runs([[99]], [1, 2, 3], 8), cliff).cost == pytest.approx(3.0)
    assert cheapest_copy(runs, cliff, min_run=18).cost == pytest.approx(17.0)  # no run is long enough


def test_hindsight_k_drafts_a_perfect_prediction_whole_from_the_first_pass():
    """Knowing the output, the chosen part drafts exactly as far as it matches: a prediction equal to the output
    then takes ceil(n / (k_max + 1)) passes, where the policy itself starts short (nothing is known yet) and
    verifies no token it would reject."""
    out = list(range(100, 140))
    spec = SpeculationParams(prediction=tuple(out))
    policy = lambda: DraftPolicy(make_proposer([1, 2, 3], spec), CURVE, trees=False)  # noqa: E731
    plain = simulate_policy(policy(), out, k_max=16)
    best_k = simulate_policy(policy(), out, k_max=16, hindsight="k")
    assert best_k.passes == 3 < plain.passes
    assert best_k.cost < plain.cost
    assert all(proposed == accepted for proposed, accepted in best_k.sources.values())


def test_hindsight_source_drafts_from_the_part_that_matches():
    """The prediction is wrong from its third token while the prompt holds the output: with the best source in
    hindsight the n-gram part drafts where it matches further, and nothing verified is ever rejected."""
    out = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    prompt = [1, 2] + out + [3]
    spec = SpeculationParams(prediction=(5, 6, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49))
    policy = lambda: DraftPolicy(make_proposer(prompt, spec), CURVE, trees=False)  # noqa: E731
    best = simulate_policy(policy(), out, hindsight="source")
    assert best.sources.get("ngram", [0, 0])[1] > 0
    assert all(proposed == accepted for proposed, accepted in best.sources.values())
    assert best.cost <= simulate_policy(policy(), out, hindsight="k").cost + 1e-9
    with pytest.raises(ValueError):
        simulate_policy(policy(), out, hindsight="oracle")


@FAST
@given(seqs, seqs)
def test_hindsight_never_verifies_a_rejected_token(pred, out):
    prompt = [7, 8] + pred + [9]
    spec = SpeculationParams(prediction=tuple(pred) if pred else None)
    for hindsight in ("k", "source"):
        result = simulate_policy(DraftPolicy(make_proposer(prompt, spec), CURVE, trees=False), out, hindsight=hindsight)
        assert all(proposed == accepted for proposed, accepted in result.sources.values())
        assert result.passes <= len(out)


def test_a_replay_prices_each_pass_after_the_prompt_and_the_output_so_far():
    """``context``: the replay's passes come after the prompt's tokens, each dearer by what its cached keys add
    (with hindsight too); without attention in the curve the context changes nothing."""
    out = list(range(100, 160))
    spec = SpeculationParams(prediction=tuple(out))
    curve = CostModel(CURVE.points, AttentionCost(per_pass=1e-3, per_token=1e-4, reference=0))
    for hindsight in (None, "k"):
        near = simulate_policy(DraftPolicy(make_proposer([1, 2, 3], spec), curve, trees=False), out,
                               hindsight=hindsight, context=10)
        far = simulate_policy(DraftPolicy(make_proposer([1, 2, 3], spec), curve, trees=False), out,
                              hindsight=hindsight, context=3000)
        assert far.cost > near.cost + far.passes * 2.9
        blind = [simulate_policy(DraftPolicy(make_proposer([1, 2, 3], spec), CURVE, trees=False), out,
                                 hindsight=hindsight, context=c).cost for c in (10, 3000)]
        assert blind[0] == blind[1]
