"""Prompt-lookup decoding, incremental: propose what followed the latest earlier occurrence of the suffix.

Like vLLM's ``v1/spec_decode/ngram_proposer.py`` and transformers' prompt lookup, but the index is updated as
tokens are observed instead of being searched again every step: each n-gram (min_n <= n <= max_n) maps to the
position right after its most recent occurrence that already has a continuation.

Example, min_n=1, max_n=3, context = [1, 2, 3, 4, 1, 2]::

    the longest suffix with an earlier occurrence is [1, 2] (positions 0-1), followed by [3, 4, 1, 2]
    propose(3) -> [3, 4, 1]
    observe([3]) -> suffix [1, 2, 3] occurred at 0-2: propose(3) -> [4, 1, 2]

Cost: O(max_n - min_n + 1) dictionary updates per observed token, O(max_n) lookups per proposal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from foretell.core.draft import Draft, Proposer


@dataclass(frozen=True)
class NgramConfig:
    """``min_n``/``max_n``: suffix lengths tried, longest first. ``weak_cap``: when set, a match of n tokens
    proposes at most ``weak_cap << (n - 1)`` tokens (short drafts on weak evidence); None = up to k."""

    min_n: int = 1
    max_n: int = 4
    weak_cap: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.min_n <= self.max_n:
            raise ValueError("need 1 <= min_n <= max_n")
        if self.weak_cap is not None and self.weak_cap < 1:
            raise ValueError("weak_cap must be >= 1 or None")


class NgramProposer(Proposer):
    """Proposes the continuation of the latest earlier occurrence of the longest matching suffix of
    prompt + output (see the module docstring for an example)."""

    source = "ngram"

    def __init__(self, context_ids: Sequence[int] = (), min_n: int = 1, max_n: int = 4,
                 weak_cap: int | None = None):
        self.config = NgramConfig(min_n, max_n, weak_cap)
        self._tokens: list[int] = []
        self._follow: dict[tuple[int, ...], int] = {}  # n-gram -> index right after its latest occurrence
        self._match: tuple[int, int] | None = None  # cached (start, n) for the current suffix
        self.observe(context_ids)

    @property
    def match_length(self) -> int:
        """Length of the suffix n-gram the next draft continues (0 when there is none)."""
        return self._lookup()[1]

    def context(self) -> str:
        """``ngram/n`` for a match of n tokens (longer matches continue correctly more often)."""
        return f"ngram/{self.match_length}"

    def available(self) -> int:
        start, n = self._lookup()
        return len(self._tokens) - start if n else 0

    def suggested_cap(self) -> int | None:
        """``weak_cap << (match_length - 1)`` when ``weak_cap`` is set, else None (no cap)."""
        n = self.match_length
        if self.config.weak_cap is None or not n:
            return None
        return self.config.weak_cap << min(n - 1, 24)

    def propose(self, k: int) -> Draft:
        start, n = self._lookup()
        if not n or k <= 0:
            return Draft([], None, "ngram")
        cap = self.suggested_cap()
        if cap is not None:
            k = min(k, cap)
        return Draft(self._tokens[start:start + k], None, "ngram")

    def observe(self, tokens: Sequence[int]) -> None:
        seq, follow = self._tokens, self._follow
        min_n, max_n = self.config.min_n, self.config.max_n
        for token in tokens:
            end = len(seq)  # the n-grams ending right before ``end`` are now followed by ``token``
            for n in range(min_n, min(max_n, end) + 1):
                follow[tuple(seq[end - n:end])] = end
            seq.append(int(token))
        if tokens:
            self._match = None

    def _lookup(self) -> tuple[int, int]:
        """(start of the continuation, n) for the longest suffix with an earlier occurrence, else (0, 0)."""
        if self._match is None:
            self._match = (0, 0)
            seq = self._tokens
            for n in range(min(self.config.max_n, len(seq)), self.config.min_n - 1, -1):
                start = self._follow.get(tuple(seq[len(seq) - n:]))
                if start is not None:
                    self._match = (start, n)
                    break
        return self._match
