"""Incremental prompt-lookup (n-gram) proposer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foretell.core.ngram import NgramConfig, NgramProposer


def reference(seq: list[int], k: int, min_n: int, max_n: int) -> list[int]:
    """Brute force: the longest suffix (max_n .. min_n) with an earlier occurrence that has a continuation;
    propose what followed its latest such occurrence."""
    for n in range(min(max_n, len(seq)), min_n - 1, -1):
        suffix = seq[len(seq) - n:]
        for start in range(len(seq) - n - 1, -1, -1):
            if seq[start:start + n] == suffix:
                return seq[start + n:start + n + k]
    return []


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=60), st.lists(st.integers(0, 5), max_size=30),
       st.integers(1, 3), st.integers(0, 3), st.integers(1, 12))
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


def test_config_validation():
    with pytest.raises(ValueError):
        NgramConfig(min_n=0)
    with pytest.raises(ValueError):
        NgramConfig(min_n=3, max_n=2)
    with pytest.raises(ValueError):
        NgramConfig(weak_cap=0)
