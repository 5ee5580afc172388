"""The per-request proposer the engine uses: the prediction aligner, with n-gram lookup while it is lost.

Example::

    spec = SpeculationParams(prediction=(5, 6, 7, 8))           # method "auto"
    proposer = make_proposer(prompt_ids=[1, 2, 3], spec=spec)   # PredictionProposer(+ n-gram fallback)
    proposer.propose(3)  -> Draft([5, 6, 7], source="prediction")
    proposer.observe([5, 9])  # 9 departs from the prediction: the aligner guesses, then realigns
    # With no matched evidence for any anchor, drafts come from the n-gram fallback (source "ngram")
    # when it has a match, else from the aligner's bare guess.

Where the prompt holds the prediction inside a Markdown code fence (the file the edit is about), the reply
usually repeats the fence before the file: a second part, :class:`LeadIn`, drafts that fence line followed by
the prediction from the reply's first token (the draft riding on the prompt's last chunk), where the aligner
could only offer the prediction itself and would learn the fence token by token.
"""

from __future__ import annotations

from typing import Collection, Sequence

import numpy as np

from foretell.config import SpeculationParams
from foretell.core.aligner import AlignerConfig, PredictionAligner
from foretell.core.draft import Draft, Proposer
from foretell.core.ngram import NgramProposer
from foretell.core.tokens import TokenClasses


class LeadIn(Proposer):
    """The prediction with a lead-in (e.g. the prompt's fence line "```python" and its line break), drafted from the
    reply's first token for as long as the output follows it; once the output departs it proposes nothing
    again (the aligner realigns on its own). Context ``prediction/lead``: its own acceptance estimate.

    Example: lead [7, 8], prediction [5, 6, 9] -> propose(3) == [7, 8, 5]; observe([7, 8, 5]) -> propose(2) == [6, 9];
    observe([4]) -> nothing more.
    """

    source = "prediction"

    def __init__(self, lead: Sequence[int], prediction: Sequence[int]):
        self._tokens = list(map(int, lead)) + list(map(int, prediction))
        self._length = len(prediction)
        self._pos = 0  # output tokens that followed the lead-in so far
        self._following = True

    @classmethod
    def fence(cls, prompt_ids: Sequence[int], prediction: Sequence[int], classes: TokenClasses,
              probe: int = 4, max_lead: int = 8) -> "LeadIn | None":
        """The prediction led by the fence line right before its last occurrence in the prompt (its first
        ``probe`` tokens found there, after a line break, on a line of at most ``max_lead`` tokens that starts
        with a fence token), or None where the prompt holds no such fenced copy."""
        if not classes.fence or len(prediction) < probe or len(prompt_ids) <= probe:
            return None
        prompt = np.asarray(prompt_ids, dtype=np.int64)
        head = np.asarray(prediction[:probe], dtype=np.int64)
        windows = np.lib.stride_tricks.sliding_window_view(prompt, probe)
        found = np.flatnonzero((windows == head).all(axis=1))
        if not found.size or found[-1] == 0 or int(prompt[found[-1] - 1]) not in classes.newline:
            return None
        at = int(found[-1])
        for start in range(at - 1, max(at - 1 - max_lead, -1), -1):
            token = int(prompt[start])
            if token in classes.fence:
                return cls(prompt_ids[start:at], prediction)
            if token in classes.newline and start < at - 1:
                return None
        return None

    @property
    def lead(self) -> list[int]:
        """The tokens drafted before the prediction (the prompt's fence line)."""
        return self._tokens[:len(self._tokens) - self._length]

    def context(self) -> str:
        return "prediction/lead"

    def available(self) -> int:
        return len(self._tokens) - self._pos if self._following else 0

    def propose(self, k: int) -> Draft:
        if not self._following or k <= 0:
            return Draft([], None, self.source)
        return Draft(self._tokens[self._pos:self._pos + k], None, self.source)

    def observe(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            if not self._following:
                return
            if self._pos < len(self._tokens) and self._tokens[self._pos] == int(token):
                self._pos += 1
            else:
                self._following = False


class FenceOpening(LeadIn):
    """A reply that opens a code fence of its own is followed by the prediction: once the output's first fence
    line has its language (or a fence token holding it), this proposes the line break and the prediction,
    then follows the output like :class:`LeadIn` (context ``prediction/lead``). Chat models open a fence
    where the prompt holds the file without one, after a preamble ("Here is the file:"), or with another
    language than the prompt's. With ``lead`` (the prompt's fence line before its copy of the prediction) it
    first drafts that from the reply's first token, as :class:`LeadIn`, and watches for the reply's own fence
    line once the reply departs from it before the prediction starts. It watches the reply's first fence
    line only, within its first ``max_wait`` tokens, so a fence closing the file, or one inside a followed
    Markdown prediction, starts nothing.

    Without it the fence line's language and line break took a pass each, and the aligner's line guess one
    more, before the prediction drafted long (0.5B, real edits with the file unfenced in the prompt).

    Example: fence 20, line break 10, prediction [5, 6]: observe([20, 21]) -> propose(3) == [10, 5, 6].
    """

    def __init__(self, prediction: Sequence[int], classes: TokenClasses, lead: Sequence[int] = (),
                 max_wait: int = 48):
        super().__init__(lead, prediction)
        self._prediction = list(map(int, prediction))
        self._lead = len(lead)
        self._classes = classes
        self._line: list[int] = []  # the output's current line while watching
        self._seen = 0  # output tokens observed so far, while leading or watching
        self._watching = not lead
        self._following = bool(lead)
        self._max_wait = max_wait

    @classmethod
    def create(cls, prediction: Sequence[int], classes: TokenClasses,
               lead: Sequence[int] = ()) -> "LeadIn | None":
        """The opening, or the plain :class:`LeadIn` of ``lead`` (None without one) where the tokens are
        unknown or the prediction opens with a fence itself (the aligner follows such a reply)."""
        if classes.line_break is None or not classes.fence or not prediction or int(prediction[0]) in classes.fence:
            return LeadIn(lead, prediction) if lead else None
        return cls(prediction, classes, lead)

    def _ready(self) -> bool:
        line = self._line
        return (self._watching and bool(line) and line[0] in self._classes.fence
                and (line[0] not in self._classes.bare_fence or len(line) >= 2))

    def available(self) -> int:
        if self._watching:
            return len(self._prediction) + 1 if self._ready() else 0
        return super().available()

    def propose(self, k: int) -> Draft:
        if self._watching:
            if not self._ready() or k <= 0:
                return Draft([], None, self.source)
            return Draft(([self._classes.line_break] + self._prediction)[:k], None, self.source)
        return super().propose(k)

    def observe(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            token = int(token)
            if self._watching:
                self._watch(token)
                continue
            followed = self._pos
            super().observe([token])
            if self._seen == followed and followed < self._lead and not self._following:
                # departed from the prompt's fence line before the prediction: watch for the reply's own
                self._watching = True
                line = self._tokens[:followed]
                nl = [i for i, t in enumerate(line) if t in self._classes.newline]
                self._line = line[nl[-1] + 1:] if nl else line
                self._watch(token)
                continue
            self._seen += 1

    def _watch(self, token: int) -> None:
        self._seen += 1
        if self._ready() and token in self._classes.newline:
            self._watching = False  # the fence line ends: follow the prediction from here, or never
            if token == self._classes.line_break:
                self._tokens, self._pos, self._following = [token] + self._prediction, 1, True
        elif self._seen > self._max_wait and not self._ready():
            self._watching = False
        elif token in self._classes.newline:
            self._line = []
        else:
            self._line.append(token)


class PredictionEnd(Proposer):
    """A part that drafts the rest of the prediction (the aligner, a lead-in), continued past the prediction's
    end with what followed the prediction's last tokens in the prompt (``ngram``: n-gram lookup over the prompt,
    :meth:`NgramProposer.continuation`, a match of 8+ tokens), at most ``extra`` tokens.

    A reply that rewrites a file the prompt holds in a code fence ends with the fence's closing line and the end
    of the turn, after the prediction's last token. A draft that stops at the prediction's end leaves those
    tokens to one more pass (on the recorded real edits, a 4-pass reply spent its last pass on
    ``\\n```<|im_end|>``). Everything else is the part's own: its context, estimate, cap and observation;
    the continuation's tokens count as the part's drafts (source ``prediction``). OpenAI's accepted prediction
    tokens are counted from the alignment, not from drafts, and leave them out.
    """

    REACH = 1024  # the longest draft any step may ask for (k_max's bound): farther ends are not looked up

    def __init__(self, part: Proposer, ngram: NgramProposer, extra: int = 16):
        self.part, self.ngram, self.extra = part, ngram, extra
        self.source = part.source
        self._available: tuple[tuple[int, int], int] | None = None  # ((tokens seen, rest), available)

    def _end(self, draft: list[int]) -> list[int]:
        return self.ngram.continuation(draft, self.extra) if draft else []

    def propose(self, k: int) -> Draft:
        rest = self.part.available()
        draft = self.part.propose(min(k, rest))
        if k <= rest or len(draft.tokens) < rest:  # the draft stops short of the prediction's end
            return draft
        return Draft(draft.tokens + self._end(draft.tokens)[:k - rest], draft.probs, draft.source)

    def available(self) -> int:
        rest = self.part.available()
        if not 0 < rest <= self.REACH:  # (a draft of the whole rest costs O(rest) with rewrites active)
            return rest
        # the policy asks several times a step; the part changes only as the output grows, which ``ngram``
        # (the same output's lookup) counts
        stamp = (self.ngram.observed, rest)
        if self._available is None or self._available[0] != stamp:
            self._available = (stamp, rest + len(self._end(self.part.propose(rest).tokens)))
        return self._available[1]

    def suggested_cap(self) -> int | None:
        cap, rest = self.part.suggested_cap(), self.part.available()
        return cap if cap is None or cap < rest else self.available()

    def observe(self, tokens: Sequence[int]) -> None:
        """Nothing: the composite observes the part itself."""

    def context(self) -> str:
        return self.part.context()

    def active_source(self) -> str:
        return self.part.active_source()


class PredictionProposer(Proposer):
    """Drafts from the prediction while it has an anchor, from ``fallback`` (e.g. n-gram) while lost.

    An empty prediction proposes nothing from the prediction: every draft comes from the fallback.
    ``newline_ids`` (token ids whose text holds a line break) and ``value_ids`` (literal values: digits, booleans) are
    optional: they sharpen the aligner's guesses and rewrites (see :class:`PredictionAligner`).
    """

    def __init__(self, prediction_ids: Sequence[int], search_length: int | None = None,
                 fallback: Proposer | None = None, config: AlignerConfig | None = None,
                 newline_ids: Collection[int] | None = None, lead_in: LeadIn | None = None,
                 value_ids: Collection[int] | None = None):
        self.aligner = PredictionAligner(prediction_ids, search_length, config, newline_ids, value_ids)
        self.fallback = fallback
        self.lead_in = lead_in
        # the parts the policy scores: where the prompt holds the file, drafts run on past the prediction's end
        ends = (lambda part: PredictionEnd(part, fallback)) if isinstance(fallback, NgramProposer) else (lambda part: part)
        self._parts = [ends(self.aligner)] + ([ends(lead_in)] if lead_in is not None else []) + (
            [fallback] if fallback is not None else [])

    @property
    def lost(self) -> bool:
        """No trusted anchor in the prediction: not aligned and no hypothesis or guess scoring
        ``AlignerConfig.anchor_score`` (a bare guess after a divergence is not an anchor)."""
        return not self.aligner.has_anchor

    def _active(self) -> Proposer:
        """The proposer that drafts now: the aligner while aligned; once the output has departed, whichever
        has clearly more matched evidence behind its next draft (the fallback's n-gram length over the aligner's
        matched tokens + 1: spurious short anchors in a useless prediction must not crowd out n-gram lookup),
        and the fallback while the aligner has no trusted anchor at all."""
        fallback = self.fallback
        if fallback is None or self.aligner.aligned or fallback.available() <= 0:
            return self.aligner
        if self.lost or getattr(fallback, "match_length", 0) > self.aligner.evidence + 1:
            return fallback
        return self.aligner

    def propose(self, k: int) -> Draft:
        return self._active().propose(k)

    def active_source(self) -> str:
        return self._active().active_source()

    def observe(self, tokens: Sequence[int]) -> None:
        self.aligner.observe(tokens)
        for part in (self.lead_in, self.fallback):
            if part is not None:
                part.observe(tokens)

    def available(self) -> int:
        return self._active().available()

    def parts(self) -> list[Proposer]:
        """The aligner, the lead-in (if any), then the fallback: the draft policy scores each every step (the
        first two continued past the prediction's end where the fallback is n-gram lookup: :class:`PredictionEnd`)."""
        return list(self._parts)

    def suggested_cap(self) -> int | None:
        """The drafting proposer's cap (the aligner's confidence-based cap, see
        :meth:`PredictionAligner.suggested_cap`)."""
        return self._active().suggested_cap()


def make_proposer(prompt_ids: Sequence[int], spec: SpeculationParams,
                  classes: TokenClasses | None = None) -> Proposer | None:
    """The proposer for one request, by ``spec.method`` (see :class:`SpeculationParams`):

    - the prediction is used (a non-empty one, method ``auto`` or ``prediction``): :class:`PredictionProposer`,
      with an :class:`NgramProposer` over the prompt as fallback for ``auto``, and a :class:`LeadIn` where the
      prompt holds the prediction in a code fence, within a :class:`FenceOpening` (for a reply that opens a
      fence line of its own);
    - else n-gram lookup is allowed (``auto`` or ``ngram``): :class:`NgramProposer` over the prompt;
    - otherwise None (plain decoding).

    ``classes`` (optional): the vocabulary's line-break and fence tokens (:class:`TokenClasses`, found once
    per tokenizer): they sharpen the aligner's guesses after an output line break and find the fence.
    """
    if spec.k_max == 0:
        return None
    if spec.uses_prediction:
        classes = classes or TokenClasses()
        fallback = NgramProposer(prompt_ids) if spec.uses_ngram else None
        fenced = LeadIn.fence(prompt_ids, spec.prediction, classes)
        lead_in = FenceOpening.create(spec.prediction, classes, fenced.lead if fenced else ())
        return PredictionProposer(spec.prediction, spec.search_length, fallback, newline_ids=classes.newline,
                                  lead_in=lead_in, value_ids=classes.values)
    if spec.uses_ngram:
        return NgramProposer(prompt_ids)
    return None
