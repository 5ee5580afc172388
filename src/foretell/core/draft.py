"""The one proposer interface shared by the prediction aligner, n-gram lookup and draft models.

A proposer belongs to one request. Each engine step asks it for up to ``k`` draft tokens, the target
model verifies them in one forward pass, and the proposer is told every token that was appended to the
output (accepted draft tokens and the target's own next token) through :meth:`Proposer.observe`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass
class Draft:
    """Draft tokens proposed for the next positions of one request.

    ``probs`` is the draft distribution q at each drafted position (shape ``[len(tokens), vocab]``, a torch
    tensor) when the proposer is a model; ``None`` means a one-hot draft (a static prediction or an n-gram),
    for which verification samples from p and accepts while the sample equals the draft.
    ``source`` names the proposer that produced the tokens ("prediction", "ngram", "draft_model"): usage
    counts accepted/rejected *prediction* tokens from it.
    """

    tokens: list[int] = field(default_factory=list)
    probs: Any = None
    source: str = "none"

    def __len__(self) -> int:
        return len(self.tokens)


EMPTY_DRAFT = Draft()


class Proposer(ABC):
    """Proposes draft tokens for one request. ``source`` names the drafts it makes (see :class:`Draft`).
    ``token_cost``: what drafting one token costs before the target's pass, in one-token target passes
    (0 for a prediction or n-gram lookup; a draft model's own pass per token)."""

    source: str = "none"
    token_cost: float = 0.0

    @abstractmethod
    def propose(self, k: int) -> Draft:
        """Return at most ``k`` draft tokens continuing the output observed so far (maybe none)."""

    @abstractmethod
    def observe(self, tokens: Sequence[int]) -> None:
        """Record tokens appended to the output, in order (accepted draft tokens and the bonus token)."""

    def available(self) -> int:
        """How many tokens the proposer could propose right now (an upper bound; large if unknown)."""
        return 1 << 30

    def active_source(self) -> str:
        """The source of the next draft (a composite proposer names the part that drafts now): the engine
        keeps one acceptance estimate per source, so a failing prediction does not starve n-gram drafts."""
        return self.source

    def suggested_cap(self) -> int | None:
        """A cap on the next proposal when evidence is weak (e.g. right after a re-anchor); None = no cap."""
        return None

    def parts(self) -> list["Proposer"]:
        """The single-source proposers the draft policy chooses among (a composite lists its parts; they
        are observed through the composite)."""
        return [self]

    def context(self) -> str:
        """The key of the acceptance estimate for the next draft: the source, refined by the state it drafts
        from where that predicts acceptance (e.g. ``prediction/aligned``, ``ngram/3``)."""
        return self.active_source()


class CombinedProposer(Proposer):
    """Several proposers for one request (e.g. the prediction aligner with n-gram lookup, and a draft
    model): the draft policy scores every part each step and the best one drafts; all observe the output.
    Without a policy, the first part that has something to propose drafts."""

    def __init__(self, proposers: Sequence[Proposer]):
        self.proposers = list(proposers)

    def _active(self) -> Proposer:
        return next((p for p in self.proposers if p.available() > 0), self.proposers[0])

    def propose(self, k: int) -> Draft:
        return self._active().propose(k)

    def observe(self, tokens: Sequence[int]) -> None:
        for proposer in self.proposers:
            proposer.observe(tokens)

    def available(self) -> int:
        return max(p.available() for p in self.proposers)

    def active_source(self) -> str:
        return self._active().active_source()

    def parts(self) -> list[Proposer]:
        return [part for proposer in self.proposers for part in proposer.parts()]

    @property
    def aligner(self):
        """The prediction aligner among the parts, if any (for the trace)."""
        return next((a for p in self.proposers if (a := getattr(p, "aligner", None)) is not None), None)

