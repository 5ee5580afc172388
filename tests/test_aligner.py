"""Prediction aligner and the per-request PredictionProposer / make_proposer factory."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foretell.config import SpeculationParams
from foretell.core.aligner import AlignerConfig, PredictionAligner
from foretell.core.draft import Draft
from foretell.core.ngram import NgramProposer
from foretell.core.prediction import PredictionProposer, make_proposer
from foretell.core.simulate import oracle, simulate

FAST = settings(max_examples=60, deadline=None)

# ------------------------------------------------------------------------------------------ strategies

tokens = st.integers(min_value=0, max_value=12)  # a small alphabet: many repeats, many candidate anchors
predictions = st.lists(tokens, min_size=0, max_size=120)
edit_ops = st.lists(
    st.tuples(st.sampled_from(["insert", "delete", "replace", "move", "duplicate"]),
              st.floats(0, 1), st.integers(1, 12), st.floats(0, 1)),
    max_size=6,
)


def apply_edits(pred: list[int], ops) -> list[int]:
    """Apply an edit script: (kind, where in [0, 1], size, where-to in [0, 1]); new tokens are >= 100."""
    out = list(pred)
    for kind, where, size, dest in ops:
        at = int(where * len(out))
        if kind == "insert":
            out[at:at] = [100 + (at + j) % 7 for j in range(size)]
        elif kind == "delete":
            del out[at:at + size]
        elif kind == "replace":
            out[at:at + size] = [100 + j for j in range(max(1, size // 2))]
        elif kind == "move":
            block = out[at:at + size]
            del out[at:at + size]
            to = int(dest * len(out))
            out[to:to] = block
        else:  # duplicate
            block = out[at:at + size]
            out[at + len(block):at + len(block)] = block
    return out


def drive(aligner: PredictionAligner, output: list[int], k: int, check, emitted=lambda tokens: None) -> None:
    """The standard rule (accept the matching draft prefix + one token), calling check(draft) each step and
    emitted(tokens) with what the step emitted."""
    pos = 0
    while pos < len(output):
        draft = aligner.propose(k)
        check(draft)
        hits = 0
        while hits < len(draft.tokens) and pos + hits < len(output) and draft.tokens[hits] == output[pos + hits]:
            hits += 1
        aligner.observe(output[pos:pos + hits + 1])
        emitted(output[pos:pos + hits + 1])
        pos += hits + 1


# ------------------------------------------------------------------------------------------ properties


@FAST
@given(predictions, edit_ops, st.integers(1, 70), st.sampled_from([None, 1, 4, 32]))
def test_drafts_are_contiguous_substrings_of_the_prediction(pred, ops, k, search_length):
    output = apply_edits(pred, ops)
    aligner = PredictionAligner(pred, search_length=search_length, newline_ids={0},
                                config=AlignerConfig(learn_rewrites=False))

    def check(draft: Draft) -> None:
        assert draft.source == "prediction" and draft.probs is None
        assert len(draft.tokens) <= k
        if draft.tokens:
            start = aligner.position
            assert 0 <= start and start + len(draft.tokens) <= len(pred)
            assert pred[start:start + len(draft.tokens)] == draft.tokens
            assert aligner.available() == len(pred) - start

    drive(aligner, output, k, check)


@FAST
@given(predictions, edit_ops, st.integers(1, 70))
def test_rewritten_drafts_hold_only_tokens_of_the_prediction_or_the_output_so_far(pred, ops, k):
    output = apply_edits(pred, ops)
    aligner = PredictionAligner(pred, newline_ids={0})
    seen = set(pred)

    def check(draft: Draft) -> None:
        assert len(draft.tokens) <= k
        assert set(draft.tokens) <= seen

    drive(aligner, output, k, check, emitted=seen.update)


@FAST
@given(predictions, st.lists(st.integers(1, 80), max_size=40), st.integers(1, 64))
def test_fast_path_proposes_exactly_the_next_tokens_while_aligned(pred, steps, k):
    aligner = PredictionAligner(pred)
    pos = 0
    for size in steps:
        assert aligner.aligned
        assert aligner.propose(k).tokens == pred[pos:pos + k]
        assert aligner.available() == len(pred) - pos
        aligner.observe(pred[pos:pos + size])
        pos = min(len(pred), pos + size)
    assert aligner.propose(k).tokens == pred[pos:pos + k]


@FAST
@given(predictions, edit_ops, st.integers(1, 12))
def test_search_length_bounds_realignment(pred, ops, search_length):
    """While diverged, drafts start at most search_length past the last matched position, plus the
    output tokens observed since (a hypothesis found in the window moves along as it is confirmed)."""
    output = apply_edits(pred, ops)
    aligner = PredictionAligner(pred, search_length=search_length, newline_ids={0})
    state = {"anchor": 0, "since": 0}
    pos = 0
    while pos < len(output):
        draft = aligner.propose(16)
        if draft.tokens and not aligner.aligned:
            assert aligner.position <= state["anchor"] + search_length + state["since"]
        hits = 0
        while hits < len(draft.tokens) and pos + hits < len(output) and draft.tokens[hits] == output[pos + hits]:
            hits += 1
        for token in output[pos:pos + hits + 1]:
            was_aligned, before = aligner.aligned, aligner.last_matched
            aligner.observe([token])
            if was_aligned and not aligner.aligned:
                state = {"anchor": aligner.last_matched, "since": 1}
            elif not aligner.aligned:
                state["since"] += 1
            elif not was_aligned:  # re-anchored: within the window of the previous anchor
                assert aligner.last_matched <= state["anchor"] + search_length + state["since"]
            del before
        pos += hits + 1


def test_search_length_forbids_far_realignment():
    pred = list(range(100))
    output = pred[:30] + [1000, 1001] + pred[60:]  # 30 tokens deleted: beyond a window of 8
    aligner = PredictionAligner(pred, search_length=8)
    drive(aligner, output, 16, lambda d: d.tokens and assert_start_within(d, 30 + 8 + 2 + 1))
    unbounded = PredictionAligner(pred)
    assert simulate(unbounded, output, 16).passes < simulate(PredictionAligner(pred, search_length=8), output,
                                                             16).passes


def assert_start_within(draft: Draft, limit: int) -> None:
    assert draft.tokens[0] <= limit  # tokens are their own positions here


# ------------------------------------------------------------------------------------------ examples


def test_worked_example_from_the_docstring():
    a, b, c, d, e, f, g, h, x, y = range(10)
    aligner = PredictionAligner([a, b, c, d, e, f, g, h])
    assert aligner.propose(4).tokens == [a, b, c, d]
    aligner.observe([a, b, x])
    assert not aligner.aligned and aligner.last_matched == 2
    assert aligner.propose(4).tokens == [d, e, f, g]  # x replaced c
    aligner.observe([y])
    assert aligner.propose(4).tokens == [c, d, e, f]  # x y were inserted
    aligner.observe([c])
    assert aligner.aligned and aligner.propose(4).tokens == [d, e, f, g]


def test_in_line_rename_realigns_after_the_renamed_token():
    # "    total_count = foo_bar(x) + 1\n" with foo_bar -> fooBar: the tokenizer splits differently
    line = [" total", "_count", " =", " foo", "_bar", "(x", ")", " +", " 1", "\n"]
    renamed = [" total", "_count", " =", " fooBar", "(x", ")", " +", " 1", "\n"]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(line + renamed))}
    pred = [vocab[t] for t in line] * 3
    out = [vocab[t] for t in renamed] * 3
    aligner = PredictionAligner(pred)
    aligner.observe(out[:4])  # ... " fooBar": diverged
    aligner.observe(out[4:5])  # "(x" matches P[5]: the rest of the line matches again
    assert aligner.aligned and aligner.propose(4).tokens == pred[6:10]
    # the second time the same rename is guessed from the learnt edit, before any evidence
    aligner.observe(out[5:9] + out[9:13])
    assert aligner.propose(3).tokens == pred[15:18]


def _renamed_file(rename_all: bool) -> tuple[list[int], list[int]]:
    """Six lines that each use identifier 50 once among varied tokens; the output renames it to 60 (and
    keeps it after the first line unless ``rename_all``)."""
    pred, out = [], []
    for line in range(6):
        body = [100 + 7 * line + j for j in range(7)]
        pred += body[:3] + [50] + body[3:] + [1]
        out += body[:3] + [60 if rename_all or line == 0 else 50] + body[3:] + [1]
    return pred, out


def test_a_rename_is_drafted_through_after_its_first_use():
    pred, out = _renamed_file(rename_all=True)
    with_rewrites = simulate(PredictionAligner(pred), out, 64).passes
    without = simulate(PredictionAligner(pred, config=AlignerConfig(learn_rewrites=False)), out, 64).passes
    assert with_rewrites <= 3  # the first use departs (and realigns); from then on the rename is drafted
    assert without >= 7  # every later use departs from the prediction again
    aligner = PredictionAligner(pred)
    aligner.observe(out[:5])  # ... 60 (renamed) then the line goes on as predicted
    assert aligner.aligned and aligner.propose(64).tokens == out[5:5 + 64]


def test_an_insertion_after_a_token_is_drafted_where_that_token_recurs():
    # "n" -> "n Value" (a parameter renamed by appending a token) in every use
    pred, out = [], []
    for line in range(5):
        body = [100 + 6 * line + j for j in range(6)]
        pred += body[:2] + [50] + body[2:] + [1]
        out += body[:2] + [50, 61] + body[2:] + [1]
    assert simulate(PredictionAligner(pred), out, 64).passes <= 3
    assert simulate(PredictionAligner(pred, config=AlignerConfig(learn_rewrites=False)), out, 64).passes >= 6


def test_an_insertion_is_not_drafted_twice_where_the_prediction_already_has_it():
    a, x, y, b, c, d, e, f, g, h = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
    pred = [a, x, b, c, d, e, 20, 21, x, y, f, g, h]
    out = [a, x, y, b, c, d, e, 20, 21, x, y, f, g, h]  # y inserted after the first x; the second has it
    aligner = PredictionAligner(pred)
    aligner.observe(out[:3])  # a x y: departs at b
    aligner.observe(out[3:4])  # b: a one-token insertion after a good run, realigned; x -> x y learnt
    assert aligner.aligned and aligner.propose(64).tokens == [c, d, e, 20, 21, x, y, f, g, h]
    aligner.observe(out[4:])
    assert aligner.aligned and aligner.position == -1


def test_a_rewrite_the_output_refuses_stops_being_drafted():
    pred, out = _renamed_file(rename_all=False)
    aligner = PredictionAligner(pred)
    line = len(pred) // 6
    aligner.observe(out[:line + 2])  # the first line renamed; the second line's start
    assert aligner.propose(3).tokens == [out[line + 2], 60, out[line + 4]]  # the rename is drafted
    aligner.observe([out[line + 2], 50])  # the output keeps 50 here: one refusal against one use
    assert aligner.aligned and aligner.propose(64).tokens == pred[line + 4:line + 4 + 64]
    with_rewrites = simulate(PredictionAligner(pred), out, 64).passes
    without = simulate(PredictionAligner(pred, config=AlignerConfig(learn_rewrites=False)), out, 64).passes
    assert with_rewrites <= without + 1


def test_an_edited_value_is_not_drafted_into_later_numbers():
    """A version bumped (14.1.0 -> 15.1.0) is a value, not a name: the commit hash below keeps its 4s. Learnt as a
    rewrite (no value tokens known), the digit substitution turns every later 4 in the drafts."""
    d = {str(i): 10 + i for i in range(10)}  # digit tokens 10..19
    dot, nl, version, commit, name = 1, 2, 30, 31, 32
    hash_ = [d["0"], 40, d["7"], 41, d["4"], 42, d["7"], 43, d["3"], d["1"], d["4"], 44, d["1"], 45]
    body = [33, 34, 35, nl, 36, d["4"], 37, d["1"], 38, nl, 39, 46, 47, nl]
    pred = [name, nl, version, d["1"], d["4"], dot, d["1"], dot, d["0"], nl, commit, *hash_, nl, *body]
    out = list(pred)
    out[4] = d["5"]
    values = set(d.values())
    aligner = PredictionAligner(pred, newline_ids={nl}, value_ids=values)
    aligner.observe(out[:6])  # 15. : the substitution closed, realigned
    assert aligner.aligned and aligner.propose(64).tokens == pred[6:]
    with_values = simulate(PredictionAligner(pred, newline_ids={nl}, value_ids=values), out, 64).passes
    as_names = PredictionAligner(pred, newline_ids={nl})
    as_names.observe(out[:6])
    assert as_names.propose(64).tokens[:2] == [d["1"], dot]
    assert as_names.propose(64).tokens != pred[6:]  # the rewrite 4 -> 5 turns the hash's 4s
    assert simulate(PredictionAligner(pred, newline_ids={nl}), out, 64).passes > with_values


def test_a_flag_turned_on_is_not_drafted_into_later_flags():
    nl, colon, true, false = 1, 2, 3, 4
    lines = [[20 + i, 40 + i, 60 + i, colon, true if i in (0, 4, 5) else false, nl] for i in range(7)]
    pred = [t for line in lines for t in line]
    out = list(pred)
    out[10] = true  # the second line's flag turned on; the others stay as they are
    aligner = PredictionAligner(pred, newline_ids={nl}, value_ids={true, false})
    aligner.observe(out[:13])  # ... true, the line break, the third line's first token: realigned
    assert aligner.aligned and aligner.propose(64).tokens == pred[13:]
    as_names = PredictionAligner(pred, newline_ids={nl})
    as_names.observe(out[:13])
    assert as_names.propose(64).tokens[:4] == [42, 62, colon, true]  # false -> true learnt: refused here


def test_repeated_lines_prefer_the_anchor_that_continues_order():
    line = [7, 8, 9, 1]
    blocks = [[20, 21, 22, 1], [30, 31, 32, 1], [40, 41, 42, 1]]
    pred = blocks[0] + line + blocks[1] + line + blocks[2] + line
    inserted = [50, 51, 1]
    # output: up to the second copy of `line`, an inserted line, then the rest
    cut = len(blocks[0] + line + blocks[1])
    out = pred[:cut] + inserted + pred[cut:]
    aligner = PredictionAligner(pred)
    aligner.observe(out[:cut + len(inserted) + 2])  # inserted line, then "7 8" of the second copy
    assert aligner.position == cut + 2  # not after the first or third copy


@pytest.mark.parametrize("kind", ["insert", "delete", "replace", "move_back", "move_forward", "duplicate"])
def test_single_edits_cost_few_passes_beyond_the_oracle(kind):
    rng = random.Random(kind)
    pred = [rng.randrange(5000) for _ in range(600)]  # mostly distinct tokens
    if kind == "insert":
        out = pred[:300] + [9000 + i for i in range(12)] + pred[300:]
    elif kind == "delete":
        out = pred[:300] + pred[340:]
    elif kind == "replace":
        out = pred[:300] + [9000, 9001] + pred[303:]
    elif kind == "move_back":
        out = pred[:100] + pred[400:500] + pred[100:400] + pred[500:]
    elif kind == "move_forward":
        out = pred[:100] + pred[200:500] + pred[100:200] + pred[500:]
    else:
        out = pred[:300] + pred[250:300] + pred[300:]
    ours = simulate(PredictionAligner(pred), out, 64).passes
    best = oracle(pred, out, 64).passes
    assert best <= ours <= best + 4


def test_perfect_prediction_matches_the_oracle():
    pred = list(range(1000))
    assert simulate(PredictionAligner(pred), pred, 64).passes == oracle(pred, pred, 64).passes


def test_weak_evidence_gives_short_drafts_and_strong_long():
    rng = random.Random(1)
    pred = [rng.randrange(5000) for _ in range(400)]
    aligner = PredictionAligner(pred)
    aligner.observe(pred[:100] + [9999])  # diverged: a bare guess
    assert not aligner.aligned and aligner.evidence == 0
    assert 0 < aligner.suggested_cap() <= 16
    aligner.observe(pred[200:210])  # a far jump confirmed by ten tokens: aligned again
    assert aligner.aligned and aligner.suggested_cap() == len(pred) - 210


def test_empty_prediction_and_output_past_the_end():
    empty = PredictionAligner([])
    assert empty.propose(8).tokens == [] and empty.available() == 0
    empty.observe([1, 2, 3])
    assert empty.propose(8).tokens == []
    aligner = PredictionAligner([1, 2, 3])
    aligner.observe([1, 2, 3, 4, 5, 1])
    draft = aligner.propose(8)
    assert draft.tokens == [] or [1, 2, 3][aligner.position:][: len(draft.tokens)] == draft.tokens


def test_config_validation():
    with pytest.raises(ValueError):
        AlignerConfig(search_length=0)
    with pytest.raises(ValueError):
        AlignerConfig(weak_cap=0)
    assert PredictionAligner([1], search_length=4).config.search_length == 4


# ------------------------------------------------------------------------------------------ proposer


def test_prediction_proposer_falls_back_while_lost():
    pred = list(range(100, 150))
    prompt = [1, 2, 3, 4, 5]
    proposer = PredictionProposer(pred, fallback=NgramProposer(prompt))
    assert proposer.propose(4) == Draft(pred[:4], None, "prediction")
    proposer.observe([100, 101, 1, 2])  # lost in text the prediction lacks; the prompt has "1 2 3 4 5"
    assert proposer.lost
    assert proposer.propose(2) == Draft([3, 4], None, "ngram")
    proposer.observe([3, 4, 5, 102, 103])  # back in the prediction
    assert not proposer.lost and proposer.propose(3).tokens == [104, 105, 106]


def test_empty_prediction_uses_only_the_fallback():
    proposer = PredictionProposer((), fallback=NgramProposer([5, 6, 7]))
    proposer.observe([5])
    assert proposer.propose(2) == Draft([6, 7], None, "ngram")
    assert PredictionProposer(()).propose(4).tokens == []


def test_make_proposer_factory():
    prompt = [1, 2, 3]
    with_fallback = make_proposer(prompt, SpeculationParams(prediction=(5, 6, 7)))
    assert isinstance(with_fallback, PredictionProposer) and isinstance(with_fallback.fallback, NgramProposer)
    alone = make_proposer(prompt, SpeculationParams(prediction=(5, 6, 7), method="prediction", search_length=4))
    assert isinstance(alone, PredictionProposer) and alone.fallback is None
    assert alone.aligner.config.search_length == 4
    assert isinstance(make_proposer(prompt, SpeculationParams(prediction=None)), NgramProposer)
    assert isinstance(make_proposer(prompt, SpeculationParams(prediction=())), NgramProposer)
    assert make_proposer(prompt, SpeculationParams(prediction=None, method="none")) is None
    assert make_proposer(prompt, SpeculationParams(prediction=(), method="none")) is None


def test_prediction_proposer_names_the_source_that_drafts_next():
    """The engine keeps one acceptance estimate per source; the composite proposer says which one drafts."""
    from foretell.core.ngram import NgramProposer
    from foretell.core.prediction import PredictionProposer

    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    proposer = PredictionProposer([50, 51, 52, 53, 54, 55], fallback=NgramProposer(prompt))
    assert proposer.active_source() == "prediction"
    assert proposer.propose(3).source == "prediction"
    proposer.observe([1, 2, 3])  # the output follows the prompt, not the prediction
    assert proposer.lost
    assert proposer.active_source() == proposer.propose(4).source == "ngram"


def test_a_reanchor_drafts_in_its_own_context_until_the_output_follows_it():
    """After a re-anchor in the middle of the output the aligner is aligned again but names the context
    ``prediction/reanchored`` until ``confirm_tokens`` more tokens have followed the prediction (a 4-token
    phrase inside text the model is writing anew can be a wrong anchor; one estimate with the long runs
    before it drafted 68 tokens there on the 1.5B). The first anchor of a reply that opened with other text
    (a preamble) is trusted at once."""
    pred = list(range(100, 200))
    aligner = PredictionAligner(pred)
    aligner.observe(pred[:30] + [7, 8, 9])  # followed 30 tokens, then left the prediction
    assert not aligner.aligned
    aligner.observe(pred[60:64])  # 4 matched tokens of distinct values: a strong re-anchor at 64
    assert aligner.aligned and aligner.position == 64 and aligner.context() == "prediction/reanchored"
    aligner.observe(pred[64:67])
    assert aligner.context() == "prediction/reanchored"  # 3 of 4 confirming tokens
    aligner.observe(pred[67:68])
    assert aligner.context() == "prediction/aligned"

    opened = PredictionAligner(pred)
    opened.observe([7, 8, 9] + pred[:4])  # a preamble, then the prediction from its start
    assert opened.aligned and opened.context() == "prediction/aligned"

    trusting = PredictionAligner(pred, config=AlignerConfig(confirm_tokens=0))
    trusting.observe(pred[:30] + [7, 8, 9] + pred[60:64])
    assert trusting.aligned and trusting.context() == "prediction/aligned"


def test_a_reply_that_mostly_leaves_the_prediction_drafts_its_quotes_in_a_context_of_their_own():
    """An explanation or a review of the file quotes pieces of it: after ``quote_after`` output tokens of which
    fewer than ``quote_share`` lined up with the prediction, an alignment (or an anchored re-entry) drafts as
    ``prediction/quote``, so the draft policy learns how long such quotes run apart from the long runs of an
    edit. A reply that follows the file, a preamble before it included, stays ``prediction/aligned``."""
    pred = list(range(100, 300))
    prose = [7, 8, 9, 10, 11, 12, 13, 14] * 5  # 40 tokens of text the file does not hold
    quoting = PredictionAligner(pred)
    quoting.observe(prose + pred[50:58])  # then a quote of 8 tokens
    assert quoting.aligned and quoting.matched == 8
    assert quoting.quoting and quoting.context() == "prediction/quote"

    editing = PredictionAligner(pred)
    editing.observe(prose[:12] + pred[:60])  # a preamble, then the file
    assert editing.aligned and not editing.quoting and editing.context() == "prediction/aligned"
    editing.observe(prose + pred[60:64])  # an inserted block: most of the output still follows the file
    assert not editing.quoting and editing.context() == "prediction/reanchored"

    short = PredictionAligner(pred)
    short.observe(prose[:20] + pred[50:58])  # too few tokens yet to tell
    assert not short.quoting and short.context() == "prediction/aligned"

    off = PredictionAligner(pred, config=AlignerConfig(quote_share=0.0))
    off.observe(prose + pred[50:58])
    assert not off.quoting and off.context() == "prediction/aligned"


def test_a_false_anchor_back_in_the_file_is_undone_when_the_output_leaves_it():
    """New text can share a phrase with an earlier part of the file (": int =" of a type hint added to a def
    line, and of a dataclass field above it). Four tokens of it re-anchor there; when the output leaves that
    anchor again at once, the aligner goes on from where the output departed, not from the false anchor."""
    head = [50, 51, 52, 53, 60, 61, 62]  # the shared phrase 50..53 early in the file
    body = list(range(100, 160))  # a long stretch of distinct tokens
    after = [70, 71, 72, 73, 74, 75, 76, 77]  # what follows the edit point
    pred = head + body + after
    departed = len(head) + len(body)
    aligner = PredictionAligner(pred)
    aligner.observe(head + body)  # aligned through the body
    aligner.observe([50, 51, 52, 53])  # inserted text that repeats the head's phrase: a jump back
    assert aligner.aligned and aligner.position == 4  # re-anchored back there (not yet confirmed)
    aligner.observe([99])  # the output leaves the false anchor at once (P[4] = 60 was its next token)
    assert not aligner.aligned
    assert aligner.last_matched == departed  # the divergence is measured from the edit point again
    assert aligner.propose(4).tokens == after[:4]  # an insertion: continue at the departure point
    aligner.observe(after)
    assert aligner.aligned and aligner.propose(8).tokens == []  # followed to the end


def test_a_confirmed_jump_back_stays():
    """A moved block: once the output follows the earlier part for ``confirm_tokens`` more tokens, the jump
    back is the new anchor and a later departure is measured from there."""
    head = [50, 51, 52, 53, 60, 61, 62, 63, 64, 65]
    body = list(range(100, 160))
    pred = head + body + [70, 71]
    aligner = PredictionAligner(pred)
    aligner.observe(head + body)
    aligner.observe([50, 51, 52, 53, 60, 61, 62, 63])  # 4 to re-anchor, 4 more confirm it
    aligner.observe([99])
    assert not aligner.aligned and aligner.last_matched == 8


NL = 9  # the line-break token of the closer tests


def docstring_edit(functions: int, closer: int = 50) -> tuple[list[int], list[int]]:
    """(prediction, output): ``functions`` def lines, each followed by a body line; the output inserts a
    three-line docstring after every def line (prose lines of tokens not in the prediction, then the closer
    line ``closer, NL``) and keeps every body."""
    pred, out = [], []
    for f in range(functions):
        define, body = [10 + f * 3, 11 + f * 3, 12 + f * 3, NL], [200 + f * 5 + j for j in range(4)] + [NL]
        doc = [300 + f * 7, 301 + f * 7, NL, 302 + f * 7, 303 + f * 7, 304 + f * 7, NL, closer, NL]
        pred += define + body
        out += define + doc + body
    return pred, out


def test_an_insertion_ending_like_the_last_one_rejoins_the_line_it_left():
    """Docstrings added to every function: after the first one the output rejoined its function's body; its
    closing line is learnt, and the next docstring that closes the same way drafts the departure line as
    ``prediction/rejoin``, while line breaks inside the docstring stay plain line guesses."""
    pred, out = docstring_edit(3)
    aligner = PredictionAligner(pred, newline_ids={NL})
    first = len(out) // 3
    aligner.observe(out[:first])  # def, docstring, body of the first function
    assert aligner.aligned
    second = out[first:2 * first]
    aligner.observe(second[:4 + 3])  # def line, then the docstring's first line
    assert not aligner.aligned and aligner.context() != "prediction/rejoin"
    aligner.observe(second[7:11])  # its second line
    assert aligner.context() != "prediction/rejoin"
    aligner.observe(second[11:13])  # the closing line the first docstring ended with
    assert aligner.context() == "prediction/rejoin"
    assert aligner.propose(5).tokens == pred[13:18]  # the second function's body

    plain = PredictionAligner(pred, newline_ids={NL}, config=AlignerConfig(learn_closers=False))
    plain.observe(out[:first] + second[:13])
    assert plain.context() != "prediction/rejoin"


def test_learnt_closers_cost_less_under_the_draft_policy():
    """The policy learns the acceptance of rejoins apart from the line guesses inside a block (which fail at
    every line but the last): simulated with a cost curve, the docstring edit costs less with closers learnt."""
    from foretell.core.adaptive_k import CostModel
    from foretell.core.policy import DraftPolicy
    from foretell.core.simulate import simulate_policy

    pred, out = docstring_edit(12)
    cost = CostModel({2: 1.15, 4: 1.4, 8: 1.9, 16: 1.9, 32: 2.6, 64: 2.7, 128: 3.7})  # the 1.5B's, SPR
    costs = {}
    for learn in (True, False):
        proposer = PredictionProposer(pred, config=AlignerConfig(learn_closers=learn), newline_ids={NL})
        costs[learn] = simulate_policy(DraftPolicy(proposer, cost), out).cost
    assert costs[True] < 0.95 * costs[False]


def test_the_line_after_an_edited_line_drafts_in_a_context_of_its_own():
    """Type hints added to a def line: the output leaves the line in its middle and closes it with a line break
    of its own. The next prediction line is then guessed as ``prediction/line`` (its acceptance is learnt apart
    from the guesses inside inserted blocks); a line break inside an inserted block (the output left P at a line
    start) or after a second output line guesses the prediction line as ``prediction/block`` (the new lines may
    end there: learnt apart from the re-entries on one or two matched tokens, as most such guesses fail)."""
    colon = 8  # the prediction's lines end with a line-break token ("):\n") the output does not use
    define, body = [10, 11, 12, 13, colon], [20, 21, 22, 23, colon]
    pred = define + body + [30, 31, 32, colon]
    newlines = {NL, colon}
    edited = PredictionAligner(pred, newline_ids=newlines)
    edited.observe([10, 11, 12, 40, 41, 42, NL])  # "(self, sku):" -> "(self, sku: str) -> None:"
    assert not edited.aligned and edited.context() == "prediction/line"
    assert edited.propose(5).tokens == body
    edited.observe([43, NL])  # a second new line: the edited line was not the whole edit
    assert edited.context() == "prediction/block"

    inserted = PredictionAligner(pred, newline_ids=newlines)
    inserted.observe(define + [44, 45, NL])  # a line inserted before the body: the output left P at a line start
    assert not inserted.aligned and inserted.context() == "prediction/block"
    assert inserted.propose(5).tokens == body  # the same guess, in a context of its own
    inserted.observe([46, 47])  # mid-line inside the block: no line guess
    assert inserted.context() not in ("prediction/block", "prediction/line")
