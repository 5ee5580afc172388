"""Incremental prompt-lookup (n-gram) proposer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foretell.core.ngram import NgramConfig, NgramProposer


def reference(seq: list[int], k: int, min_n: int, max_n: int) -> list[int]:
    """Brute force: the longest suffix (of the indexed lengths, max_n .. min_n) with an earlier occurrence
    that has a continuation; propose what followed its latest such occurrence."""
    for n in reversed(NgramConfig(min_n, max_n).sizes):
        if n > len(seq):
            continue
        suffix = seq[len(seq) - n:]
        for start in range(len(seq) - n - 1, -1, -1):
            if seq[start:start + n] == suffix:
                return seq[start + n:start + n + k]
    return []


@settings(max_examples=120, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=60), st.lists(st.integers(0, 3), max_size=30),
       st.integers(1, 3), st.integers(0, 14), st.integers(1, 12))
def test_matches_brute_force_as_tokens_arrive(context, output, min_n, extra, k):
    max_n = min_n + extra
    proposer = NgramProposer(context, min_n=min_n, max_n=max_n)
    seq = list(context)
    assert proposer.propose(k).tokens == reference(seq, k, min_n, max_n)
    for token in output:
        proposer.observe([token])
        seq.append(token)
        draft = proposer.propose(k)
        assert draft.tokens == reference(seq, k, min_n, max_n)
        assert draft.source == "ngram" and draft.probs is None
        assert proposer.available() >= len(draft.tokens)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=60), st.lists(st.integers(0, 3), max_size=60),
       st.lists(st.integers(1, 20), min_size=1, max_size=8), st.integers(1, 3), st.integers(0, 14))
def test_tokens_arriving_in_runs_index_as_one_at_a_time(context, output, runs, min_n, extra):
    """An engine step observes a whole accepted run at once (the index is built slice by slice): the same
    index, and the same drafts, as observing its tokens one by one."""
    max_n = min_n + extra
    at_once, one_by_one = NgramProposer(context, min_n=min_n, max_n=max_n), NgramProposer(context, min_n=min_n, max_n=max_n)
    from_scratch = NgramProposer([], min_n=min_n, max_n=max_n)  # the context observed too, token by token
    for token in context:
        from_scratch.observe([token])
    seq, i = list(context), 0
    while i < len(output):
        run = output[i:i + runs[i % len(runs)]]
        at_once.observe(run)
        for token in run:
            one_by_one.observe([token])
            from_scratch.observe([token])
        seq += run
        i += len(run)
        assert at_once.propose(8).tokens == from_scratch.propose(8).tokens == reference(seq, 8, min_n, max_n)
    assert at_once._follow == one_by_one._follow and at_once._tokens == one_by_one._tokens == seq


class _Colliding(NgramProposer):
    _HASH_BASE = 0  # every n-gram's hash is its last token: the context's lookups must check the tokens


@settings(max_examples=120, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=80), st.lists(st.integers(0, 3), max_size=30),
       st.integers(1, 3), st.integers(0, 14), st.integers(1, 12))
def test_context_lookup_checks_tokens_behind_a_hash(context, output, min_n, extra, k):
    """The context's n-grams are found by hash; with a hash that collides for every n-gram ending in the
    same token, lookups still return the latest true occurrence (brute force), in the context and past it."""
    max_n = min_n + extra
    proposer, seq = _Colliding(context, min_n=min_n, max_n=max_n), list(context)
    assert proposer.propose(k).tokens == reference(seq, k, min_n, max_n)
    for token in output:
        proposer.observe([token])
        seq.append(token)
        assert proposer.propose(k).tokens == reference(seq, k, min_n, max_n)


def test_docstring_example():
    proposer = NgramProposer([1, 2, 3, 4, 1, 2], min_n=1, max_n=3)
    assert proposer.propose(3).tokens == [3, 4, 1]
    assert proposer.match_length == 2
    proposer.observe([3])
    assert proposer.propose(3).tokens == [4, 1, 2]


def test_proposes_the_continuation_of_an_earlier_occurrence_in_the_output():
    proposer = NgramProposer([])
    proposer.observe([10, 11, 12, 13, 14, 99, 10, 11])
    assert proposer.propose(8).tokens == [12, 13, 14, 99, 10, 11]
    assert proposer.propose(0).tokens == []


def test_no_match_proposes_nothing():
    proposer = NgramProposer([1, 2, 3], min_n=2)
    proposer.observe([7])
    assert proposer.propose(4).tokens == [] and proposer.available() == 0 and proposer.match_length == 0


def test_weak_cap_shortens_drafts_on_short_matches():
    proposer = NgramProposer(list(range(50)) + [0], max_n=4, weak_cap=2)
    assert proposer.propose(64).tokens == list(range(1, 3))  # 1-token match: at most 2 tokens
    proposer.observe([1, 2, 3])
    assert proposer.propose(64).tokens == list(range(4, 20))  # 4-token match: 2 << 3 = 16


def test_a_long_match_tells_apart_what_a_short_one_confuses():
    """A block repeated in the file: after the first copy of it, its last 4 tokens were last followed by
    what follows the second copy. An 8-token match reaches back into the tokens before the block and
    proposes what follows the first copy, which a lookup of at most 4 tokens gets wrong."""
    a, block, b, c = [1, 2, 3, 4], [50, 51, 52, 53, 54, 55], [60, 61, 62], [70, 71, 72]
    file = a + block + b + [9] + block + c
    prompt = [100, 101] + file + [102]
    for max_n, expected in ((16, b), (4, c)):
        proposer = NgramProposer(prompt, max_n=max_n)
        proposer.observe(a + block)  # the output copies the file
        assert proposer.propose(3).tokens == expected
    copying = NgramProposer(prompt)
    copying.observe(a[:1])
    assert copying.match_length == 1 and copying.context() == "ngram/1"
    copying.observe(a[1:] + block)
    assert copying.match_length == 8 and copying.context() == "ngram/4"  # past 4 tokens: one estimate


def test_the_index_holds_every_length_up_to_4_then_doublings():
    assert NgramConfig().sizes == (1, 2, 3, 4, 8, 16)
    assert NgramConfig(min_n=2, max_n=12).sizes == (2, 3, 4, 8, 12)
    assert NgramConfig(max_n=4).sizes == (1, 2, 3, 4)
    tokens = list(range(1000))
    proposer = NgramProposer(tokens)
    assert len(proposer._follow) <= len(NgramConfig().sizes) * len(tokens)


def test_config_validation():
    with pytest.raises(ValueError):
        NgramConfig(min_n=0)
    with pytest.raises(ValueError):
        NgramConfig(min_n=3, max_n=2)
    with pytest.raises(ValueError):
        NgramConfig(weak_cap=0)
    with pytest.raises(ValueError):
        NgramConfig(dense_n=0)
