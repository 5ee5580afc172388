"""Count target forward passes for a proposer on a known output, against an oracle and two baselines.

The standard rule, one target pass per iteration: the proposer drafts d (len(d) <= k); the target accepts
the longest prefix of d that matches the output O at the current position and adds one token of its own;
the proposer observes the accepted tokens and that one. Passes are what a lossless drafter saves.

The oracle knows O: each pass it drafts the longest substring of P that matches O at the current position
(capped at k). Greedy-longest is optimal because the ends i + min(k, ms[i]) of the matching statistics are
non-decreasing in i. It walks a suffix automaton of P: O(|P| + |O|) in all.

Alignment efficiency = oracle passes / proposer passes (1.0 = as good as knowing the output).

Example, P = "a b c d", O = "a b X c d", k = 8: the oracle needs 2 passes ("a b" + X, "c d"); a
stop-at-first-divergence proposer needs 3 (a b + X, then c and d one per pass): efficiency 2/3.

Baselines (here only, for comparison): :class:`FirstDivergenceProposer` (OpenAI-like: the prediction in
order until the first mismatch, then nothing) and :class:`LineBasedProposer` (Cascade-like: after a
mismatch nothing until an output line completes that equals a later prediction line).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, Union

import numpy as np

from foretell.core.adaptive_k import CostModel
from foretell.core.draft import EMPTY_DRAFT, Draft, Proposer
from foretell.core.tokens import TokenClasses

KPolicy = Union[int, Callable[[Proposer], int]]


@dataclass
class SimResult:
    """Passes and draft counts of one simulated generation."""

    passes: int
    proposed: int
    accepted: int
    output_len: int

    @property
    def acceptance_rate(self) -> float:
        """Accepted draft tokens / proposed draft tokens (1.0 when nothing was proposed)."""
        return self.accepted / self.proposed if self.proposed else 1.0

    @property
    def tokens_per_pass(self) -> float:
        return self.output_len / self.passes if self.passes else 0.0


def efficiency(oracle: SimResult, ours: SimResult) -> float:
    """Alignment efficiency: oracle passes / our passes (1.0 for an empty output)."""
    return oracle.passes / ours.passes if ours.passes else 1.0


def simulate(proposer: Proposer, output: Sequence[int], k: KPolicy = 64) -> SimResult:
    """Generate ``output`` under the standard rule with ``proposer``; ``k`` is fixed or k(proposer)."""
    output = list(output)
    pos = passes = proposed = accepted = 0
    while pos < len(output):
        budget = k if isinstance(k, int) else int(k(proposer))
        draft = proposer.propose(max(budget, 0)).tokens
        if len(draft) > budget:
            raise ValueError(f"proposer drafted {len(draft)} tokens with k={budget}")
        hits = _common_prefix(draft, output, pos)
        step = output[pos:pos + hits + 1]  # accepted draft tokens + the target's own token (if any left)
        proposer.observe(step)
        passes += 1
        proposed += len(draft)
        accepted += hits
        pos += len(step)
    return SimResult(passes, proposed, accepted, len(output))


def _common_prefix(draft: Sequence[int], output: Sequence[int], pos: int) -> int:
    limit = min(len(draft), len(output) - pos)
    hits = 0
    while hits < limit and draft[hits] == output[pos + hits]:
        hits += 1
    return hits


class SuffixAutomaton:
    """Suffix automaton of a token sequence: every substring of it is a path from the root.

    Example: SuffixAutomaton([1, 2, 3, 1, 2]).longest_match([2, 3, 9], 0) == 2 ([2, 3] occurs).
    """

    def __init__(self, seq: Sequence[int]):
        self.next: list[dict[int, int]] = [{}]
        self.link: list[int] = [-1]
        self.length: list[int] = [0]
        last = 0
        for token in seq:
            last = self._extend(last, int(token))

    def _extend(self, last: int, token: int) -> int:
        nxt, link, length = self.next, self.link, self.length
        cur = len(nxt)
        nxt.append({})
        link.append(0)
        length.append(length[last] + 1)
        p = last
        while p != -1 and token not in nxt[p]:
            nxt[p][token] = cur
            p = link[p]
        if p != -1:
            q = nxt[p][token]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(nxt)
                nxt.append(dict(nxt[q]))
                link.append(link[q])
                length.append(length[p] + 1)
                while p != -1 and nxt[p].get(token) == q:
                    nxt[p][token] = clone
                    p = link[p]
                link[q] = link[cur] = clone
        return cur

    def longest_match(self, seq: Sequence[int], start: int, cap: int | None = None) -> int:
        """Length of the longest prefix of seq[start:] (at most ``cap``) that occurs in the sequence."""
        state, matched = 0, 0
        limit = len(seq) - start if cap is None else min(cap, len(seq) - start)
        while matched < limit:
            state = self.next[state].get(seq[start + matched], -1)
            if state < 0:
                break
            matched += 1
        return matched


def oracle(prediction: Sequence[int], output: Sequence[int], k: int = 64, min_match: int = 1) -> SimResult:
    """Passes when every draft is the longest substring of the prediction matching the output (<= k).

    ``min_match`` > 1 gives a weaker reference that drafts nothing when the longest match is shorter (it
    forgoes the single tokens of new text that only hindsight can pick out of the prediction).
    """
    automaton = SuffixAutomaton(prediction)
    output = list(output)
    pos = passes = accepted = 0
    while pos < len(output):
        hits = automaton.longest_match(output, pos, k)
        hits = hits if hits >= min_match else 0
        passes += 1
        accepted += hits
        pos = min(len(output), pos + hits + 1)
    return SimResult(passes, accepted, accepted, len(output))


def copy_oracle(sources: Sequence[Sequence[int]], output: Sequence[int], k: int = 64) -> SimResult:
    """Passes when every draft is the longest run (<= k) matching the output that can be copied from any of
    ``sources`` (e.g. the prediction and the prompt) or from the output written so far.

    Greedy-longest stays optimal: the copyable text only grows, so the ends of the longest matches are still
    non-decreasing. The output part is searched directly (O(|O|^2) worst case, fine for benchmark sizes).
    """
    static = SuffixAutomaton([t for src in sources for t in [*src, -1]])  # -1 separates the sources
    output = list(output)
    pos = passes = accepted = 0
    while pos < len(output):
        hits = max(static.longest_match(output, pos, k), _longest_in_prefix(output, pos, k))
        passes += 1
        accepted += hits
        pos = min(len(output), pos + hits + 1)
    return SimResult(passes, accepted, accepted, len(output))


def copy_runs(sources: Sequence[Sequence[int]], output: Sequence[int], k: int = 64) -> list[int]:
    """Per output position i: the longest run (<= k) starting at i that can be copied from any of ``sources``
    or from output[:i]."""
    static = SuffixAutomaton([t for src in sources for t in [*src, -1]])  # -1 separates the sources
    output = list(output)
    return [max(static.longest_match(output, i, k), _longest_in_prefix(output, i, k)) for i in range(len(output))]


@dataclass
class CopyBound:
    """The cheapest decode of an output by copying: ``cost`` in one-token passes, in ``passes``."""

    passes: int
    cost: float


def cheapest_copy(runs: Sequence[int], cost: CostModel, min_run: int = 1) -> CopyBound:
    """The least decode cost (one-token passes under ``cost``) of any lossless drafter whose drafts are copied
    runs: each pass verifies a draft of d <= runs[i] tokens at position i (:func:`copy_runs`) and emits d + 1
    tokens. It knows the output, so no drafter drawing on the same sources (a prediction aligner, n-gram
    lookup, a token tree of their candidates) decodes for less on this cost curve: a lower bound that
    counts what each pass costs, where :func:`copy_oracle` counts passes. ``min_run`` > 1 drafts only runs of
    at least that many tokens (one- to three-token runs of new text are copyable only in hindsight).

    Dynamic programming from the end: best[i] = min over d of ratio(d + 1) + best[i + d + 1].
    """
    n = len(runs)
    best = np.zeros(n + 2)
    passes = np.zeros(n + 2, dtype=np.int64)
    top = max([0, *runs])
    ratios = cost.ratios(np.arange(1, top + 2, dtype=np.float64))  # ratios[d] = t(d + 1) / t(1)
    for i in range(n - 1, -1, -1):
        run = runs[i] if runs[i] >= min_run else 0
        d_max = min(run, n - 1 - i)
        totals = ratios[: d_max + 1] + best[i + 1 : i + d_max + 2]
        d = int(np.argmin(totals))
        best[i] = totals[d]
        passes[i] = 1 + passes[i + d + 1]
    return CopyBound(int(passes[0]), float(best[0]))


def _longest_in_prefix(output: list[int], pos: int, cap: int) -> int:
    """Longest prefix of output[pos:] (<= cap) that occurs starting before ``pos`` and inside output[:pos]."""
    best = 0
    first = output[pos] if pos < len(output) else None
    for start in range(pos):
        if output[start] != first:
            continue
        n = 0
        while n < cap and start + n < pos and pos + n < len(output) and output[start + n] == output[pos + n]:
            n += 1
        best = max(best, n)
    return best


@dataclass
class PolicyResult:
    """A simulated generation under the draft policy: passes, their summed cost in one-token passes, and
    the draft tokens proposed / accepted per source."""

    passes: int
    cost: float
    output_len: int
    sources: dict[str, list[int]]

    @property
    def decode_speedup(self) -> float:
        """Plain decoding's cost (one one-token pass per token) over this run's."""
        return self.output_len / self.cost if self.cost else 1.0


HINDSIGHT = ("k", "source")


def simulate_policy(policy, output: Sequence[int], k_max: int = 128, hindsight: str | None = None,
                    context: int = 0) -> PolicyResult:
    """Generate ``output`` the way the engine does, one request alone: ``policy`` (a
    :class:`foretell.core.policy.DraftPolicy`) picks each draft (and maybe a second branch), the target
    accepts the longest prefix of either that matches the output plus one token, the policy learns and the
    proposer observes. ``sources`` counts [proposed, accepted] per source (both branches).

    ``hindsight`` bounds what a better policy could do with the same drafts, knowing the output: ``"k"``, the
    part the policy ranked first drafts exactly as many tokens as match, none where nothing matches (where the
    choice of k loses time: drafts rejected part-way, drafts that stopped while the output went on as they
    would have, and steps that drafted nothing where a draft would have paid); ``"source"``,
    every part's longest draft is compared and the one that matches furthest drafts exactly that far (where the
    choice among the sources loses time too). Chains only; the policy still learns from each step.
    ``context``: the prompt's tokens (each pass is priced after them and the output so far)."""
    if hindsight not in (None, *HINDSIGHT):
        raise ValueError(f"hindsight must be one of {HINDSIGHT} or None")
    output = list(output)
    pos = passes = 0
    cost = 0.0
    sources: dict[str, list[int]] = {}
    while pos < len(output):
        room = min(k_max, len(output) - pos - 1)
        decision = policy.decide(room, context=context + pos)
        drafts = [decision.draft, decision.branch]
        if hindsight is not None:
            drafts = [_hindsight_draft(decision, output, pos, room, hindsight)]
        hits = 0
        for draft in drafts:
            if draft is not None and draft.tokens:
                matched = _common_prefix(draft.tokens, output, pos)
                hits = max(hits, matched)
                counts = sources.setdefault(draft.source, [0, 0])
                counts[0] += len(draft)
                counts[1] += matched
        emitted = output[pos:pos + hits + 1]
        policy.record(decision, emitted)
        if policy.proposer is not None:
            policy.proposer.observe(emitted)
        passes += 1
        cost += decision.cost if hindsight is None else policy.cost.at(context + pos).ratio(len(drafts[0]) + 1)
        pos += len(emitted)
    return PolicyResult(passes, cost, len(output), sources)


def _hindsight_draft(decision, output: list[int], pos: int, room: int, hindsight: str) -> Draft:
    """The draft :func:`simulate_policy` verifies with ``hindsight``: the chosen part's (``"k"``) or the best
    matching part's (``"source"``) longest draft, cut where it stops matching the output."""
    options = [decision.chosen] if hindsight == "k" else decision.options
    best, best_len = EMPTY_DRAFT, 0
    for option in options:
        if option is None or option.limit <= 0:
            continue
        draft = option.part.propose(min(option.limit, room))
        matched = _common_prefix(draft.tokens, output, pos)
        if matched > best_len:
            best, best_len = Draft(draft.tokens[:matched], None, draft.source), matched
    return best


def newline_ids(token_ids: Iterable[int], token_text: Callable[[int], str]) -> frozenset[int]:
    """The ids among ``token_ids`` whose text contains a line break (an engine scans its whole vocabulary)."""
    ids = sorted(set(token_ids))
    return TokenClasses.from_texts(map(token_text, ids), ids).newline


class FirstDivergenceProposer(Proposer):
    """Baseline (OpenAI-like): the prediction in order until the output first departs, then nothing."""

    def __init__(self, prediction: Sequence[int]):
        self._pred = list(prediction)
        self._cursor = 0
        self._diverged = False

    def propose(self, k: int) -> Draft:
        if self._diverged:
            return Draft([], None, "prediction")
        return Draft(self._pred[self._cursor:self._cursor + k], None, "prediction")

    def observe(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            if not self._diverged and self._cursor < len(self._pred) and self._pred[self._cursor] == token:
                self._cursor += 1
            else:
                self._diverged = True


class LineBasedProposer(Proposer):
    """Baseline (Cascade-like): cursor fast path; after a mismatch, nothing is proposed until an output
    line completes that equals a prediction line at or after the diverged one, and the output's partial
    next line is a prefix of the following prediction line ending on a prediction token boundary; drafts
    then resume from there.

    Example: P lines "a = 1", "b = 2", "c = 3"; O lines "a = 1", "b = 20", "c = 3": diverged inside
    "b = 2..."; the output line "b = 20" matches nothing; "c = 3" would match, so the proposer resumes only
    after it (here: at the end).
    """

    def __init__(self, prediction: Sequence[int], token_text: Callable[[int], str]):
        self._pred = list(prediction)
        self._text = token_text
        self._offsets = [0]  # char offset where each prediction token starts (+ the end)
        for token in self._pred:
            self._offsets.append(self._offsets[-1] + len(token_text(token)))
        self._starts = {offset: i for i, offset in reversed(list(enumerate(self._offsets)))}
        full = "".join(token_text(t) for t in self._pred)
        self._lines = full.split("\n")
        self._line_offsets = [0]
        for line in self._lines[:-1]:
            self._line_offsets.append(self._line_offsets[-1] + len(line) + 1)
        self._cursor: int | None = 0
        self._search_from = 0  # first prediction line a completed output line may match
        self._partial = ""  # output text since its last newline
        self._resume_line: int | None = None  # prediction line after the last matched output line

    def propose(self, k: int) -> Draft:
        if self._cursor is None:
            return Draft([], None, "prediction")
        return Draft(self._pred[self._cursor:self._cursor + k], None, "prediction")

    def observe(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            if self._cursor is not None:
                if self._cursor < len(self._pred) and self._pred[self._cursor] == token:
                    self._cursor += 1
                else:
                    self._search_from = self._line_of(self._cursor)
                    self._cursor = None
            self._add_text(self._text(token))

    def _line_of(self, token_index: int) -> int:
        return bisect.bisect_right(self._line_offsets, self._offsets[token_index]) - 1

    def _add_text(self, text: str) -> None:
        *complete, rest = (self._partial + text).split("\n")
        self._partial = rest
        if self._cursor is not None:
            return
        for line in complete:
            self._match_line(line)
        if complete:
            self._try_resume()

    def _match_line(self, line: str) -> None:
        """Match a completed output line; blank lines are too ambiguous to match, they only step over blank
        prediction lines after a match."""
        if not line.strip():
            resume = self._resume_line
            if resume is not None and resume < len(self._lines) and not self._lines[resume].strip():
                self._resume_line = resume + 1
            return
        for idx in range(self._search_from, len(self._lines)):
            if self._lines[idx] == line:
                self._search_from = self._resume_line = idx + 1
                return
        self._resume_line = None

    def _try_resume(self) -> None:
        line = self._resume_line
        if line is None or line >= len(self._lines) or not self._lines[line].startswith(self._partial):
            return
        start = self._starts.get(self._line_offsets[line] + len(self._partial))
        if start is not None:
            self._cursor = start


@dataclass
class Comparison:
    """One (prediction, output) pair under the oracle, our proposer and the baselines."""

    oracle: SimResult
    ours: SimResult
    first_divergence: SimResult
    line_based: SimResult | None

    @property
    def efficiency(self) -> float:
        return efficiency(self.oracle, self.ours)

    @property
    def first_divergence_efficiency(self) -> float:
        return efficiency(self.oracle, self.first_divergence)

    @property
    def line_based_efficiency(self) -> float | None:
        return None if self.line_based is None else efficiency(self.oracle, self.line_based)


def compare(prediction: Sequence[int], output: Sequence[int], make_ours: Callable[[], Proposer],
            k: KPolicy = 64, token_text: Callable[[int], str] | None = None, oracle_k: int = 64) -> Comparison:
    """Simulate ``make_ours()`` and the baselines on one pair; the line baseline needs ``token_text``.

    The oracle and the baselines draft up to ``k`` when it is fixed, else ``oracle_k``.
    """
    fixed_k = k if isinstance(k, int) else oracle_k
    line_based = None
    if token_text is not None:
        line_based = simulate(LineBasedProposer(prediction, token_text), output, fixed_k)
    return Comparison(
        oracle=oracle(prediction, output, fixed_k),
        ours=simulate(make_ours(), output, k),
        first_divergence=simulate(FirstDivergenceProposer(prediction), output, fixed_k),
        line_based=line_based,
    )
