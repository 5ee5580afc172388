"""The per-request proposer the engine uses: the prediction aligner, with n-gram lookup while it is lost.

Example::

    spec = SpeculationParams(prediction=(5, 6, 7, 8))           # method "auto"
    proposer = make_proposer(prompt_ids=[1, 2, 3], spec=spec)   # PredictionProposer(+ n-gram fallback)
    proposer.propose(3)  -> Draft([5, 6, 7], source="prediction")
    proposer.observe([5, 9])  # 9 departs from the prediction: the aligner guesses, then realigns
    # With no matched evidence for any anchor, drafts come from the n-gram fallback (source "ngram")
    # when it has a match, else from the aligner's bare guess.
"""

from __future__ import annotations

from typing import Collection, Sequence

from foretell.config import SpeculationParams
from foretell.core.aligner import AlignerConfig, PredictionAligner
from foretell.core.draft import Draft, Proposer
from foretell.core.ngram import NgramProposer


class PredictionProposer(Proposer):
    """Drafts from the prediction while it has an anchor, from ``fallback`` (e.g. n-gram) while lost.

    An empty prediction proposes nothing from the prediction: every draft comes from the fallback.
    ``newline_ids`` (token ids whose text holds a line break) is optional: it sharpens guesses after an
    output line break (see :class:`PredictionAligner`).
    """

    def __init__(self, prediction_ids: Sequence[int], search_length: int | None = None,
                 fallback: Proposer | None = None, config: AlignerConfig | None = None,
                 newline_ids: Collection[int] | None = None):
        self.aligner = PredictionAligner(prediction_ids, search_length, config, newline_ids)
        self.fallback = fallback

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
        if self.fallback is not None:
            self.fallback.observe(tokens)

    def available(self) -> int:
        return self._active().available()

    def parts(self) -> list[Proposer]:
        """The aligner, then the fallback: the draft policy scores both every step."""
        return [self.aligner] if self.fallback is None else [self.aligner, self.fallback]

    def suggested_cap(self) -> int | None:
        """The drafting proposer's cap (the aligner's confidence-based cap, see
        :meth:`PredictionAligner.suggested_cap`)."""
        return self._active().suggested_cap()


def make_proposer(prompt_ids: Sequence[int], spec: SpeculationParams,
                  newline_ids: Collection[int] | None = None) -> Proposer | None:
    """The proposer for one request, by ``spec.method`` (see :class:`SpeculationParams`):

    - the prediction is used (a non-empty one, method ``auto`` or ``prediction``): :class:`PredictionProposer`,
      with an :class:`NgramProposer` over the prompt as fallback for ``auto``;
    - else n-gram lookup is allowed (``auto`` or ``ngram``): :class:`NgramProposer` over the prompt;
    - otherwise None (plain decoding).

    ``newline_ids`` (optional): the vocabulary's token ids whose text holds a line break, found once per
    tokenizer; they sharpen the aligner's guesses after an output line break.
    """
    if spec.k_max == 0:
        return None
    if spec.uses_prediction:
        fallback = NgramProposer(prompt_ids) if spec.uses_ngram else None
        return PredictionProposer(spec.prediction, spec.search_length, fallback, newline_ids=newline_ids)
    if spec.uses_ngram:
        return NgramProposer(prompt_ids)
    return None
