"""Prediction aligner: follows the output through the prediction and proposes what comes next.

The caller's prediction P (e.g. the original file) is mostly copied into the output O, with edits. While
the output is *aligned* (its latest tokens follow P up to ``cursor``) the aligner proposes
P[cursor : cursor + k] and advances in O(accepted tokens). When the output departs from P at m (the last
matched position) it keeps a few *hypotheses*: cursors in P with the evidence for them (how many latest
output tokens equal the tokens right before the cursor, and how much information those tokens carry), and
proposes from the best one until one is strong enough to become the new anchor.

- Local search: occurrences of the latest output token just before and after m (within ``search_length``).
- Global search (``search_length=None`` only): the nearest occurrences of the latest token and of the latest
  trigram anywhere in P, for moved blocks and duplicated lines.
- Ranking: evidence in bits (a token occurring c times in P is worth log2(|P| / c)) minus a penalty for
  breaking order: jumps up to ``near`` tokens past m are free, further or backward jumps cost bits.
- Cheap guesses while nothing has evidence: right after the divergence the token replaced P[m] (continue at
  m + 1); later, tokens were inserted (continue at m); after an output line break (when ``newline_ids`` is
  given), the next prediction line; and edits seen earlier in this request ("P[m] with output X -> skip r"
  is learnt at every realignment, so a renamed identifier realigns at once from its second use on).
- Rewrites: a substitution seen at a realignment (P's tokens A replaced by output tokens B, e.g. a renamed
  identifier; or tokens inserted after a token A) is applied to later drafts wherever A recurs in P,
  until the output keeps A somewhere: a rename is drafted through in one pass, a one-off change stops after
  one refusal. The aligner follows the output through a rewrite without leaving alignment.
- Small edits right after a good run (substitution, short insertion or deletion, two tokens merged into one)
  re-anchor after a single matching token.
- A jump back to an earlier part of P that the output leaves again within ``confirm_tokens`` is undone: the
  search goes on from where the output departed (new text often shares a phrase with an earlier part).
- An edited line (left in its middle) that the output closes with a line break: the next line is guessed in
  a context of its own (``prediction/line``: the policy learns its acceptance apart from other guesses).
- Inserted blocks: at every output line break inside new lines the prediction line the output left (or the
  next one) is guessed in a context of its own (``prediction/block``: most such line breaks do not end the
  block, the one that does rejoins for a long run). The last line of a block after which the output
  rejoined the line it departed from (a docstring's closing quotes) is learnt; the next block that ends
  with it rejoins at once.
- Blocks jumped over are remembered: when the output reaches the end of P, the earliest one is guessed next
  (a moved block).
- Drafts backed by weak evidence are short (``weak_cap`` doubling per ``cap_bits`` of score): a wrong anchor
  wastes little verification work. Aligned drafts are unbounded (k decides).

Worked example (token ids written as letters)::

    P = a b c d e f g h          aligner = PredictionAligner(P)
    propose(4)        -> a b c d   (aligned at 0)
    observe(a b X)    -> a, b match; X != c: diverged at m = 2 (P[2] = c was the next predicted token)
    propose(4)        -> d e f g   (guess: X replaced c, continue at m + 1)
    observe(Y)        -> Y is not in P: still diverged, no evidence
    propose(4)        -> c d e f   (guess: X Y were inserted, continue at m)
    observe(c)        -> c = P[2]: X Y inserted after a good run, a small edit: aligned again at 3
    propose(4)        -> d e f g

Cost: O(1) per aligned token; O(max_hypotheses + spawns * evidence_cap) per diverged token, independent of
|P| (``benchmarks/aligner_micro.py``: ~14 µs per aligned step and ~35 µs per step with an edit every ~50
tokens, at 1k to 32k prediction tokens). The index (one NumPy argsort, a few ms at 32k tokens) is built on
the first divergence, or up front with :meth:`PredictionAligner.build_index`. Pure Python + NumPy, no torch.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Collection, Sequence

import numpy as np

from foretell.core.draft import Draft, Proposer



@dataclass(frozen=True)
class AlignerConfig:
    """Knobs of the realignment heuristics (defaults tuned with ``benchmarks/simulate_alignment.py``).

    Window: ``search_length`` = how many prediction tokens past the last matched position realignment may
    look (None = unbounded: global search and jumps back to skipped blocks allowed).

    Re-anchoring (moves the anchor m): ``reanchor_evidence`` matched tokens scoring ``reanchor_min_bits``
    (order penalty at ``reanchor_jump_cost`` bits per doubling), or ``reanchor_bits`` of such score, or a
    single matched token when it closes an edit of at most ``bridge_gap`` tokens right after a good run.

    Search: occurrences in the ``local_window`` tokens past m (at most ``local_spawns`` per token); at most
    ``max_hypotheses`` kept; at most ``evidence_cap`` tokens compared backwards.

    Ranking: bits of evidence; cursors up to ``near`` tokens past m are free, further jumps cost
    ``jump_cost`` bits per doubling of the distance, backward ones ``back_cost`` bits more. Guesses score
    ``substitution_score`` (continue at m + 1), 0 (insertion: continue at m), ``line_score`` (the next line
    after an output line break, or a skipped block at the end) or ``learnt_score`` (an edit seen before,
    when ``learn_edits``); a hypothesis must beat the guess and ``guess_score``. Below ``anchor_score`` the
    prediction counts as lost and a fallback proposer may draft instead. An anchored hypothesis backed by
    fewer than ``anchored_evidence`` matched tokens drafts in a context of its own (``prediction/tentative``),
    so the draft policy learns its acceptance apart: inside an edit the model is still making (type hints
    added to every ``def`` line), re-entries on one or two matched tokens were refused at once while those on
    longer matches were accepted for long runs, and one estimate for both drafted 13-20 tokens that failed.
    After a re-anchor the aligner is aligned again, but until ``confirm_tokens`` more output tokens have
    followed the prediction it drafts as ``prediction/reanchored``: a 4-token phrase inside text the model is
    writing anew can be a wrong anchor, and the estimate the long aligned runs trained drafted 68 tokens
    there (the 1.5B's Markdown edit, all refused). The first anchor of an output that opened with other text
    (a reply's preamble) counts as aligned at once.

    Draft length: ``weak_cap`` doubled per ``cap_bits`` of score (4, 8, 16, ... tokens), unbounded once
    aligned.

    Quotes: once ``quote_after`` output tokens are out and fewer than ``quote_share`` of them lined up with the
    prediction, the output is a reply about the file (an explanation, a review) that quotes pieces of it, and
    every draft but a bare guess is named ``prediction/quote`` (its own estimate: such quotes last a phrase or
    a line). Its first quote was trusted as aligned and drafted 28 tokens, one kept (a review of a stylesheet on
    the 0.5B). Replayed over 72 real-edit outputs and the 14 held-out-like requests (``benchmarks/results/
    run-2026-11-28-cascadelake-q8fused/replay_quote.py``): the prediction's cost over n-gram lookup alone
    1.1718 -> 1.1730 (geomean), the review 0.942 -> 0.965 and 0.980 -> 0.992 (two curves); shares of 0.2-0.3
    did about as well, 0.4-0.5 cost the real edits up to 1%.

    Closers (``learn_closers``): the last line of an inserted block after which the output rejoined the line
    it departed from (a docstring's closing quotes); when a later insertion ends with it, the departure line
    is guessed at ``learnt_score`` and drafts as ``prediction/rejoin``.

    Rewrites (``learn_rewrites``): substitutions of at most ``rewrite_span`` prediction tokens by at most
    ``rewrite_span`` output tokens (or insertions after one token) are learnt and applied to drafts
    until the output keeps the prediction's tokens where a rewrite would apply.
    """

    search_length: int | None = None
    reanchor_evidence: int = 4
    reanchor_bits: float = 24.0
    reanchor_min_bits: float = 8.0
    reanchor_jump_cost: float = 3.0
    bridge_gap: int = 3
    local_window: int = 256
    local_spawns: int = 4
    max_hypotheses: int = 8
    evidence_cap: int = 16
    near: int = 16
    jump_cost: float = 0.5
    back_cost: float = 1.0
    guess_score: float = 2.0
    substitution_score: float = 1.0
    line_score: float = 12.0
    learnt_score: float = 20.0
    anchor_score: float = 6.0
    weak_cap: int = 4
    cap_bits: float = 2.0
    learn_edits: bool = True
    learn_rewrites: bool = True
    learn_closers: bool = True
    rewrite_span: int = 6
    anchored_evidence: int = 3
    confirm_tokens: int = 4
    quote_after: int = 32
    quote_share: float = 0.3

    def __post_init__(self) -> None:
        if self.search_length is not None and self.search_length < 1:
            raise ValueError("search_length must be >= 1 or None")
        if min(self.reanchor_evidence, self.weak_cap, self.max_hypotheses, self.near, self.rewrite_span) < 1:
            raise ValueError("reanchor_evidence, weak_cap, max_hypotheses, near and rewrite_span must be >= 1")


class _PredictionIndex:
    """Where each token occurs in the prediction: one NumPy argsort, then cached lookups.

    Example: P = [5, 7, 5, 9] -> token_positions(5) == [0, 2]; trigram_ends(7, 5, 9) == [3].
    """

    def __init__(self, prediction: list[int]):
        self._pred = prediction
        self._arr = np.asarray(prediction, dtype=np.int64)
        self._order = np.argsort(self._arr)
        self._sorted = self._arr[self._order]
        self._cache: dict[int, tuple[list[int], np.ndarray]] = {}

    def _lookup(self, token: int) -> tuple[list[int], np.ndarray]:
        found = self._cache.get(token)
        if found is None:
            lo, hi = np.searchsorted(self._sorted, (token, token + 1))
            positions = np.sort(self._order[lo:hi])
            found = self._cache[token] = (positions.tolist(), positions)
        return found

    def token_positions(self, token: int) -> list[int]:
        """Ascending positions i with P[i] == token."""
        return self._lookup(token)[0]

    def trigram_ends(self, a: int, b: int, c: int, limit: int = 64) -> list[int]:
        """Ascending positions i with P[i-2:i+1] == (a, b, c), found from the rarest of the three tokens;
        empty when even that one occurs more than ``limit`` times (such a trigram says little)."""
        lists = [self._lookup(t)[0] for t in (a, b, c)]
        offset = min(range(3), key=lambda j: len(lists[j]))
        if len(lists[offset]) > limit:
            return []
        pred, shift = self._pred, 2 - offset
        return [i + shift for i in lists[offset]
                if 2 <= i + shift < len(pred) and pred[i + shift] == c and pred[i + shift - 1] == b
                and pred[i + shift - 2] == a]


Tokens = tuple[int, ...]


class _Rewrites:
    """Rewrites the output made to the prediction: its tokens A replaced by B (a substitution), or a token A
    followed by inserted tokens (B = A + the insertion). Drafts apply, for each A, what the output did the
    last time the prediction had A: the B it made, or nothing once it kept A (followed by what the
    prediction has next). The latest use decides because edits are local: a function's variable renamed in
    one function and kept in the next costs one refused draft, not one per earlier use.

    Example: ``r.count((5,), (9,))`` -> ``r.apply([1, 5, 2, 5], 0, 4) == [1, 9, 2, 9]``; after
    ``r.count((5,), None)`` (A kept) ``apply`` returns the prediction unchanged.
    """

    def __init__(self) -> None:
        self._seen: dict[Tokens, set[Tokens]] = {}  # A -> every B made for it
        self._by_first: dict[int, list[Tokens]] = {}  # A[0] -> every A starting with it, longest first
        self._active: dict[int, list[tuple[Tokens, Tokens]]] = {}  # A[0] -> (A, B) that drafts apply

    def __bool__(self) -> bool:
        return bool(self._seen)

    @property
    def active(self) -> bool:
        return bool(self._active)

    def count(self, old: Tokens, new: Tokens | None) -> None:
        """The output made ``new`` (None: kept ``old``) where the prediction has ``old``."""
        made = self._seen.get(old)
        if made is None:
            made = self._seen[old] = set()
            olds = self._by_first.setdefault(old[0], [])
            olds.append(old)
            olds.sort(key=len, reverse=True)
        rules = [rule for rule in self._active.get(old[0], []) if rule[0] != old]
        if new is not None:
            made.add(new)
            rules.append((old, new))
            rules.sort(key=lambda rule: len(rule[0]), reverse=True)
        if rules:
            self._active[old[0]] = rules
        else:
            self._active.pop(old[0], None)

    def follow(self, pred: list[int], cursor: int, out: list[int], i: int) -> tuple[int, int] | None:
        """Where the prediction at ``cursor`` holds a known A: if the output at ``i`` makes a B seen before,
        count it and return (len(A), len(B)) to step over; where the output follows the prediction past the
        first token at which a B departs from it, count A kept. None when no rewrite is made here."""
        olds = self._by_first.get(pred[cursor])
        if not olds:
            return None
        for old in olds:
            if tuple(pred[cursor:cursor + len(old)]) != old:
                continue
            kept = False
            for new in self._seen[old]:
                depart = next((d for d, t in enumerate(new) if cursor + d >= len(pred) or pred[cursor + d] != t),
                              len(new))
                if depart == len(new):  # the prediction already reads B here (an insertion it has)
                    continue
                if tuple(out[i:i + len(new)]) == new:
                    self.count(old, new)
                    return len(old), len(new)
                kept = kept or (cursor + depart < len(pred) and out[i:i + depart + 1] == pred[cursor:cursor + depart + 1])
            if kept:
                self.count(old, None)
        return None

    def apply(self, pred: list[int], start: int, length: int) -> list[int]:
        """``length`` draft tokens from ``pred[start:]`` with the active rewrites applied."""
        draft, j, n, active = [], start, len(pred), self._active
        while len(draft) < length and j < n:
            for old, new in active.get(pred[j], ()):
                if tuple(pred[j:j + len(old)]) == old and tuple(pred[j:j + len(new)]) != new:
                    draft.extend(new)
                    j += len(old)
                    break
            else:
                draft.append(pred[j])
                j += 1
        return draft[:length]


class PredictionAligner(Proposer):
    """Proposes the prediction's next tokens and realigns after the output departs from it.

    ``newline_ids``: token ids whose text contains a line break (optional; when given, an output line
    break while diverged guesses the next prediction line). ``value_ids``: token ids of literal values, a
    number's digits or a boolean (optional; when given, an edited value is not learnt as a rewrite: a version
    bumped from 14.1.0 to 15.0.0, applied to later drafts, turned every 4 of a commit hash below into a 5, and
    one flag turned on, every later ``false``). Read-only state for the engine / adaptive k:
    :attr:`aligned`, :attr:`position` (prediction index the next draft starts at, -1 when none),
    :attr:`evidence` (matched tokens backing it), :attr:`last_matched` (the anchor realignment measures jumps
    from), :meth:`available` and :meth:`suggested_cap` (the longest draft the evidence justifies).
    """

    source = "prediction"

    def __init__(self, prediction: Sequence[int], search_length: int | None = None,
                 config: AlignerConfig | None = None, newline_ids: Collection[int] | None = None,
                 value_ids: Collection[int] | None = None):
        config = config or AlignerConfig()
        if search_length is not None:
            config = AlignerConfig(**{**config.__dict__, "search_length": search_length})
        self.config = config
        self._pred: list[int] = list(map(int, prediction))
        # a frozenset (TokenClasses.newline, some 2,000 ids) is kept as it is: one per request, at its first step
        self._newline = newline_ids if isinstance(newline_ids, frozenset) else frozenset(int(t) for t in newline_ids or ())
        self._values = value_ids if isinstance(value_ids, frozenset) else frozenset(int(t) for t in value_ids or ())
        self._index: _PredictionIndex | None = None  # built on the first divergence
        self._bits_cache: dict[int, float] = {}
        self._out: list[int] = []  # every output token observed so far
        self._matched = 0  # output tokens that lined up with the prediction (see :attr:`matched`)
        # aligned state: the next prediction index and the matched tokens behind it (the output is expected
        # to start like the prediction, so it starts trusted)
        self._aligned = True
        self._cursor = 0
        self._run = config.reanchor_evidence
        self._confirm_left = 0  # after a re-anchor: output tokens still to follow before it counts as aligned
        # diverged state
        self._anchor = 0  # m: the prediction index the output departed at
        self._prior_run = 0  # matched tokens right before the divergence
        self._since = 0  # output tokens observed since the divergence
        self._hyps: dict[int, tuple[int, float]] = {}  # cursor -> (matched tokens, bits) right before it
        self._edits: dict[tuple[int | None, tuple[int, ...]], int] = {}  # (P[m] or None, output) -> skipped
        self._skipped: list[tuple[int, int]] = []  # prediction blocks jumped over, [lo, hi)
        self._jumped_from: tuple | None = None  # the diverged state a backward re-anchor left (:meth:`_reanchor`)
        self._rewrites = _Rewrites()  # substitutions seen, applied to drafts
        self._closers: set[tuple[int, ...]] = set()  # last lines of inserted blocks the output rejoined after
        self._guess_kind: str | None = None  # "rejoin", "line", "block": such a guess drafts next (:meth:`_choose`)
        self._best: tuple[int, int] = (0 if self._pred else -1, self._run)  # (draft start, evidence)
        self._best_score = math.inf
        self._top: tuple[float, int, int, float] | None = None  # best hypothesis: (score, -cursor, tokens, bits)

    # ---- read-only state -------------------------------------------------------------------------------

    @property
    def prediction(self) -> list[int]:
        return self._pred

    @property
    def aligned(self) -> bool:
        """True while the latest output tokens follow the prediction at a trusted anchor."""
        return self._aligned

    @property
    def last_matched(self) -> int:
        """Prediction index right after the last trusted match (where the output departed, if it did)."""
        return self._cursor if self._aligned else self._anchor

    @property
    def matched(self) -> int:
        """Output tokens that lined up with the prediction so far, whoever drafted them: tokens that followed
        it while aligned, and the evidence a realignment was made on (a rewrite's tokens are not counted).
        The aligner sees every output token, so this depends on the output alone, not on the draft policy."""
        return self._matched

    @property
    def position(self) -> int:
        """Prediction index the next draft would start at, or -1 when nothing would be proposed."""
        return self._best[0]

    @property
    def evidence(self) -> int:
        """Matched output tokens backing the next draft (0 for a bare guess after a divergence)."""
        return self._best[1]

    @property
    def confidence(self) -> float:
        """Score of the next draft in bits (inf when aligned; a guess scores its kind's ``*_score``)."""
        return self._best_score if self._best[0] >= 0 else -math.inf

    @property
    def has_anchor(self) -> bool:
        """Aligned, or diverged with a draft scoring at least ``anchor_score`` (else a fallback may do better)."""
        return self._best[0] >= 0 and (self._aligned or self._best_score >= self.config.anchor_score)

    def available(self) -> int:
        start = self._best[0]
        return 0 if start < 0 else len(self._pred) - start

    def suggested_cap(self) -> int:
        """The longest draft the evidence justifies: the rest of the prediction when aligned, else
        ``weak_cap`` doubled per ``cap_bits`` of :attr:`confidence` (a bare insertion guess: 4 tokens; a
        1-token hypothesis worth 6 bits: 32; a learnt edit: unbounded, with the defaults); 0 with no draft."""
        start, evidence = self._best
        if start < 0:
            return 0
        if self._aligned and start == self._cursor:
            return len(self._pred) - start
        doublings = int(max(self._best_score, 0.0) / self.config.cap_bits)
        return self.config.weak_cap << min(doublings, 24)

    # ---- Proposer ------------------------------------------------------------------------------------

    def context(self) -> str:
        """``prediction/aligned`` while following the prediction, ``prediction/anchored`` on a hypothesis
        scoring at least ``anchor_score`` with ``anchored_evidence`` matched tokens, ``prediction/tentative``
        on one with fewer, ``prediction/rejoin`` on the departure line after a learnt closer (see
        :class:`AlignerConfig`), ``prediction/line`` on the next line once the output closed a line it left
        in its middle, ``prediction/block`` on the prediction line after any other output line break while
        diverged (the new lines may end there), ``prediction/moved`` at the prediction's end on a block the output
        jumped over (it may come now, moved; or the reply left it out, as a licence header),
        ``prediction/guess`` on a weaker one or a bare guess."""
        if self._aligned:
            if not self._out:
                return "prediction/start"
            if self._guess_kind == "moved":  # past the prediction's end: a guess, not the aligned walk
                return "prediction/moved"
            kind = "reanchored" if self._confirm_left > 0 else "aligned"
        elif not self.has_anchor:
            return "prediction/guess"
        elif self._guess_kind:
            kind = self._guess_kind
        else:
            kind = "anchored" if self.evidence >= self.config.anchored_evidence else "tentative"
        if kind != "block" and self.quoting:
            return "prediction/quote"
        return f"prediction/{kind}"

    @property
    def quoting(self) -> bool:
        """Whether the output so far mostly does not follow the prediction (at least ``quote_after`` tokens, fewer
        than ``quote_share`` of them matched): a reply about the file (an explanation, a review) that quotes
        pieces of it, where an alignment lasts a phrase or a line, not a file."""
        n = len(self._out)
        return n >= self.config.quote_after and self._matched < self.config.quote_share * n

    def propose(self, k: int) -> Draft:
        start = self._best[0]
        if start < 0 or k <= 0:
            return Draft([], None, "prediction")
        length = min(k, self.suggested_cap(), len(self._pred) - start)
        if self._rewrites.active:  # aligned: the rest of P, rewritten (it may grow); else within the cap
            following = self._aligned and start == self._cursor
            return Draft(self._rewrites.apply(self._pred, start, k if following else length), None, "prediction")
        return Draft(self._pred[start:start + length], None, "prediction")

    def observe(self, tokens: Sequence[int]) -> None:
        tokens = [int(t) for t in tokens]
        pred, n, out = self._pred, len(self._pred), self._out
        i = 0
        while i < len(tokens):
            if self._aligned:
                begin, cursor = i, self._cursor
                if self._rewrites:
                    cursor, i = self._follow(tokens, i)
                else:
                    while i < len(tokens) and cursor < n and pred[cursor] == tokens[i]:
                        cursor += 1
                        i += 1
                    self._matched += cursor - self._cursor
                out.extend(tokens[begin:i])
                self._run += cursor - self._cursor
                self._cursor = cursor
                self._confirm_left = max(0, self._confirm_left - (i - begin))
                if i == len(tokens):
                    break
                self._diverge()
            out.append(tokens[i])
            self._step_diverged(tokens[i])
            i += 1
        self._best = self._choose()

    def _follow(self, tokens: list[int], i: int) -> tuple[int, int]:
        """The aligned walk with rewrites known: match tokens from ``i`` against the prediction from the
        cursor, stepping over rewrites the output makes again and counting those it keeps; returns
        (cursor, i) where the output departs or the tokens end."""
        pred, n, cursor, rewrites = self._pred, len(self._pred), self._cursor, self._rewrites
        while i < len(tokens) and cursor < n:
            step = rewrites.follow(pred, cursor, tokens, i)
            if step is not None:
                cursor, i = cursor + step[0], i + step[1]
            elif pred[cursor] == tokens[i]:
                cursor, i = cursor + 1, i + 1
                self._matched += 1
            else:
                break
        return cursor, i

    # ---- divergence and realignment --------------------------------------------------------------------

    def build_index(self) -> None:
        """Build the prediction index now (else on the first divergence): O(|P| log |P|) with NumPy."""
        self._index_or_build()

    def _index_or_build(self) -> _PredictionIndex:
        if self._index is None:
            self._index = _PredictionIndex(self._pred)
        return self._index

    def _diverge(self) -> None:
        self._aligned = False
        self._hyps = {}
        self._top = None
        if self._confirm_left > 0 and self._jumped_from is not None:  # a backward re-anchor refused at once
            self._anchor, self._prior_run, since, seen, self._skipped = self._jumped_from
            self._since = since + len(self._out) - seen
        else:
            self._anchor = self._cursor
            self._prior_run = self._run
            self._since = 0
        self._jumped_from = None

    def _step_diverged(self, token: int) -> None:
        """Extend the hypotheses that predicted ``token``, add new ones where it occurs (searching wide only
        when no hypothesis is being extended), keep the best few, and re-anchor on a strong one."""
        self._since += 1
        pred, n, cfg = self._pred, len(self._pred), self.config
        gain = self._bits(token)
        hyps: dict[int, tuple[int, float]] = {}
        longest = 0
        for cursor, (evidence, bits) in self._hyps.items():
            if cursor < n and pred[cursor] == token:
                hyps[cursor + 1] = (evidence + 1, bits + gain)
                longest = max(longest, evidence + 1)
        for i in self._spawn_positions(token, wide=longest < 2):
            if i + 1 not in hyps:
                hyps[i + 1] = self._evidence_at(i)
        score = self._score
        ranked = sorted(((score(c, b), -c, e, b) for c, (e, b) in hyps.items()), reverse=True)
        ranked = ranked[: cfg.max_hypotheses]
        self._hyps = {-neg_cursor: (e, b) for _, neg_cursor, e, b in ranked}
        self._top = ranked[0] if ranked else None
        if self._top is None:
            return
        _, neg_cursor, evidence, bits = self._top
        cursor = -neg_cursor
        strict = score(cursor, bits, strict=True)
        strong = evidence >= cfg.reanchor_evidence and strict >= cfg.reanchor_min_bits
        if strong or strict >= cfg.reanchor_bits or self._bridges(cursor, evidence):
            self._learn_edit(cursor, evidence)
            self._learn_closer(cursor, evidence)
            self._reanchor(cursor, evidence)

    def _bridges(self, cursor: int, evidence: int) -> bool:
        """A small edit right after a good run: the hypothesis resumes P at most ``bridge_gap`` edits from
        the divergence (substitution, short insertion or deletion, two tokens merged into one, ...)."""
        skipped = cursor - evidence - self._anchor  # prediction tokens the output left out
        inserted = self._since - evidence  # output tokens that are not in the prediction
        return (self._prior_run >= self.config.reanchor_evidence and skipped >= 0 and inserted >= 0
                and skipped + inserted <= self.config.bridge_gap)

    def _learn_edit(self, cursor: int, evidence: int) -> None:
        """Remember a short edit that this realignment closed: "output X where P[m] was expected -> skip r
        prediction tokens", keyed by (P[m], X) and by X alone (a renamed identifier recurs before varied
        tokens); and, where it replaced prediction tokens A by X, the rewrite A -> X for later drafts."""
        skipped, inserted = cursor - evidence - self._anchor, self._since - evidence
        if inserted < 1 or skipped < 0 or self._anchor >= len(self._pred):
            return
        emitted = tuple(self._out[-self._since:][:inserted])
        if self.config.learn_edits and skipped <= 8 and inserted <= 4:
            self._edits[(self._pred[self._anchor], emitted)] = skipped
            self._edits[(None, emitted)] = skipped
        m, span = self._anchor, self.config.rewrite_span
        if not self.config.learn_rewrites or skipped > span or inserted > span:
            return
        old = tuple(self._pred[m:m + skipped]) if skipped else (self._pred[m - 1],) if m >= 1 else ()
        if all(t in self._values for t in old + emitted):  # a value edited (a number, a flag): not a name
            return
        if skipped:  # a substitution: A = the tokens replaced
            self._rewrites.count(old, emitted)
        elif old and self._prior_run >= 1 and inserted < span:  # an insertion after the matched P[m - 1]
            self._rewrites.count(old, old + emitted)

    def _learn_closer(self, cursor: int, evidence: int) -> None:
        """Where the output rejoins the prediction at the line it departed from after inserting whole lines
        (a docstring, a comment block, a logged line), remember the inserted block's last line (e.g. the
        closing quotes of a docstring): the next insertion that ends with that line is guessed to rejoin the
        same way (:meth:`_guess`), where a line guess inside the block is usually wrong."""
        rejoined = self._line_start(self._anchor)  # the departure line's start (or the departure point)
        inserted = self._since - (cursor - rejoined)  # output tokens before the one matching P[rejoined]
        covered = cursor - evidence <= rejoined < cursor  # the re-entry's matched tokens include P[rejoined]
        if not (self._newline and self.config.learn_closers and covered) or inserted < 2:
            return
        block = self._out[-self._since:][:inserted]
        line = self._last_line(block)
        if line is not None and len(self._closers) < 16:
            self._closers.add(line)

    def _last_line(self, tokens: list[int]) -> tuple[int, ...] | None:
        """The last line of ``tokens`` when they end with a line break (the tokens after the line break
        before it, up to and with it), else None."""
        if not tokens or tokens[-1] not in self._newline:
            return None
        begin = len(tokens) - 1
        while begin > 0 and tokens[begin - 1] not in self._newline:
            begin -= 1
        return tuple(tokens[begin:])

    def _latest_line_start(self, floor: int) -> int:
        """Where the output's latest line starts (right after the line break before its last token), but not
        before ``floor``: a scan back over one line, so a step costs O(line), not O(output)."""
        out, newline = self._out, self._newline
        i = len(out) - 1
        while i > floor and out[i - 1] not in newline:
            i -= 1
        return max(i, floor)

    def _reanchor(self, cursor: int, evidence: int) -> None:
        # the first anchor of an output that opened with other text (a reply's preamble) is trusted at once
        self._confirm_left = self.config.confirm_tokens if self._matched > 0 else 0
        self._matched += min(evidence, self._since)  # the matched tokens seen while diverged
        start = cursor - evidence
        # A jump back that the output leaves again before it is confirmed was a false anchor: a phrase of the
        # model's new text that an earlier part of the file shares (": int =" of a type hint added to a def
        # line, and of a dataclass field above it). The divergence then goes on from the departure point, where
        # the output is likeliest to rejoin, not from the false anchor's end. (Forward jumps stay: a port or
        # rewrite that moves through the file re-anchors ahead, and the next anchor is likelier ahead of that.)
        back = start - self._anchor < -self.config.bridge_gap
        self._jumped_from = ((self._anchor, self._prior_run, self._since, len(self._out), list(self._skipped))
                             if back else None)
        self._skipped = [(lo, hi) for lo, hi in self._skipped if not lo <= start < hi]
        jumped = start - self._anchor > self.config.bridge_gap and self.config.search_length is None
        if jumped and len(self._skipped) < 16:
            # jumped over a block: it may come later (a moved block), from the start of its line
            self._skipped.append((self._line_start(self._anchor), start))
        self._aligned = True
        self._cursor = cursor
        self._run = max(evidence, self.config.reanchor_evidence)
        self._hyps = {}
        self._top = None

    def _bits(self, token: int) -> float:
        """Information in matching ``token``: log2(len(P) / occurrences of token in P)."""
        bits = self._bits_cache.get(token)
        if bits is None:
            count = len(self._index_or_build().token_positions(token))
            bits = self._bits_cache[token] = math.log2((len(self._pred) + 1) / max(count, 1))
        return bits

    def _spawn_positions(self, token: int, wide: bool) -> list[int]:
        """Prediction indices i with P[i] == token worth a new hypothesis (cursor i + 1): the first few at or
        after m - 1 within the local window; when ``wide`` (and unbounded), also the nearest before m - 1 and
        past the window, and the nearest occurrences of the latest output trigram."""
        cfg, m = self.config, self._anchor
        positions = self._index_or_build().token_positions(token)
        lo = m - 1
        window = cfg.local_window if cfg.search_length is None else min(cfg.local_window, cfg.search_length)
        first = bisect.bisect_left(positions, lo)
        found = [i for i in positions[first:first + cfg.local_spawns] if i < m + window]
        if cfg.search_length is not None or not wide:
            return found
        if first > 0:
            found.append(positions[first - 1])  # nearest occurrence before the anchor
        beyond = bisect.bisect_left(positions, m + window, first)
        if beyond < len(positions):
            found.append(positions[beyond])  # nearest occurrence past the local window
        out = self._out
        if len(out) >= 3:
            ends = self._index_or_build().trigram_ends(out[-3], out[-2], out[-1])
            if ends:
                split = bisect.bisect_left(ends, lo)
                found.extend(ends[max(split - 1, 0):split + 1])
        return found

    def _evidence_at(self, i: int) -> tuple[int, float]:
        """(tokens, bits): how many latest output tokens equal P[..i] read backwards (capped) and the
        information they carry; (1, bits(P[i])) when only P[i] does."""
        pred, out = self._pred, self._out
        cap = min(self.config.evidence_cap, i + 1, len(out))
        length, bits = 0, 0.0
        while length < cap and pred[i - length] == out[-1 - length]:
            bits += self._bits(pred[i - length])
            length += 1
        return length, bits

    def _score(self, cursor: int, bits: float, strict: bool = False) -> float:
        """Evidence in bits minus a penalty for breaking order relative to the anchor m: cursors in
        [m, m + near] are free, jumps further ahead cost ``jump_cost`` bits per doubling of the distance,
        backward jumps ``back_cost`` bits more (``strict``: ``reanchor_jump_cost`` per doubling, used for
        re-anchoring, which moves m)."""
        cfg, m = self.config, self._anchor
        ahead = cursor - m
        if 0 <= ahead <= cfg.near:
            return bits
        per_doubling = cfg.reanchor_jump_cost if strict else cfg.jump_cost
        if ahead > 0:
            return bits - per_doubling * (ahead // cfg.near).bit_length()
        return bits - cfg.back_cost - per_doubling * (-ahead // cfg.near + 1).bit_length()

    def _guess(self) -> tuple[int, float, str | None]:
        """(cursor, score, kind) to continue at with no evidence: a learnt edit, the next line after an output
        line break (kind "line" after an edited line, "rejoin" after a learnt closer, "block" inside new lines),
        right after a replaced token, else at the anchor (an insertion)."""
        cfg, m, n, out, g = self.config, self._anchor, len(self._pred), self._out, self._since
        guess, score = (m + 1, cfg.substitution_score) if g == 1 else (m, 0.0)
        kind = None
        if self._newline and out and out[-1] in self._newline:
            guess, score = self._next_line_start(m), cfg.line_score
            diverged_at = len(out) - g
            line = self._latest_line_start(diverged_at)  # the output's latest line, since the divergence
            if self._closers and g >= 2 and tuple(out[line:]) in self._closers:
                guess, score, kind = self._line_start(m), cfg.learnt_score, "rejoin"
            elif guess > m and line == diverged_at:  # the first line break since the output left P mid-line
                kind = "line"  # the edited line is done: the next one follows
            else:  # inside new lines (an inserted block): it may end at any line break, most do not
                kind = "block"
        if self._skipped and n - guess <= 2:  # (nearly) past the end: a block jumped over earlier
            guess, score, kind = self._skipped[0][0], cfg.line_score, "moved"
        if self._edits and m < n and g <= 4:
            emitted = tuple(out[-g:])
            skip = self._edits.get((self._pred[m], emitted), self._edits.get((None, emitted)))
            if skip is not None:
                guess, score, kind = m + skip, cfg.learnt_score, None
        if cfg.search_length is not None and guess > m + cfg.search_length:
            guess, score, kind = m, 0.0, None  # beyond the search window
        return (guess, score, kind) if 0 <= guess < n else (-1, 0.0, None)

    def _line_start(self, m: int, reach: int = 2) -> int:
        """The start of the line holding m if it is at most ``reach`` tokens back (needs ``newline_ids``)."""
        pred, newline = self._pred, self._newline
        if not newline:
            return m
        for i in range(m, max(m - reach, 0) - 1, -1):
            if i == 0 or pred[i - 1] in newline:
                return i
        return m

    def _next_line_start(self, m: int, reach: int = 64) -> int:
        """The start of the line holding m when m sits at most one token into it (a whole line was
        inserted), else the start of the next line (the line was edited); m itself if neither is near."""
        start = self._line_start(m, reach=1)
        if start < m or m == 0 or self._pred[m - 1] in self._newline:
            return start
        pred, newline = self._pred, self._newline
        for i in range(m, min(len(pred), m + reach)):
            if pred[i] in newline:
                return i + 1
        return m

    def _choose(self) -> tuple[int, int]:
        """(draft start, evidence) for the next proposal; sets ``_best_score`` (its confidence in bits) and
        ``_guess_kind`` (the kind of the guess, where a guess drafts)."""
        self._guess_kind = None
        if self._aligned:
            self._best_score = math.inf
            if self._cursor < len(self._pred) - 2 or (self._cursor < len(self._pred) and not self._skipped):
                return (self._cursor, self._run)
            if self._skipped:  # at the end of the prediction: a block jumped over earlier may come now
                self._best_score, self._guess_kind = self.config.line_score, "moved"
                return (self._skipped[0][0], 0)
            return (-1, self._run)
        guess, guess_score, kind = self._guess()
        top = self._top
        if top is not None and top[0] >= max(guess_score, self.config.guess_score):
            self._best_score = top[0]
            return (-top[1], top[2]) if -top[1] < len(self._pred) else (-1, top[2])
        self._best_score, self._guess_kind = guess_score, kind
        return (guess, 0)
