"""Prompt-lookup decoding, incremental: propose what followed the latest earlier occurrence of the suffix.

Like vLLM's ``v1/spec_decode/ngram_proposer.py`` and transformers' prompt lookup, but the index is updated as
tokens are observed instead of being searched again every step: each n-gram (min_n <= n <= max_n) maps to the
position right after its most recent occurrence that already has a continuation.

Example, min_n=1, max_n=3, context = [1, 2, 3, 4, 1, 2]::

    the longest suffix with an earlier occurrence is [1, 2] (positions 0-1), followed by [3, 4, 1, 2]
    propose(3) -> [3, 4, 1]
    observe([3]) -> suffix [1, 2, 3] occurred at 0-2: propose(3) -> [4, 1, 2]

Suffixes of up to 16 tokens are indexed (1, 2, 3, 4, 8 and 16; :class:`NgramConfig`). With the file in the
prompt, a snippet of 4 tokens repeats in it (``self.state ==``, ``return None``): its latest occurrence is
often another place in the file, and lookup capped at 4 tokens drafts the wrong continuation. Replayed on
the 38 recorded outputs (0.5B, the file in the prompt) n-gram lookup alone cost 0.856x what it cost with
at most 4 tokens (Xeon fp32 curve; 0.88x on the Zen 4 bf16 curve); on three long-file edits of the 1.5B
(shlex.py in the prompt, 2,900 tokens, through the server) it took 0.75-0.78x the wall time.

Cost: the context's n-grams are hashed into arrays at once (searched per lookup); after it, one dictionary
update per indexed length per observed token, as many lookups per proposal.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from foretell.core.draft import Draft, Proposer

CONTEXT_CAP = 4  # matches longer than this share the estimate of ``ngram/4`` (see NgramProposer.context)


@dataclass(frozen=True)
class NgramConfig:
    """``min_n``/``max_n``: suffix lengths tried, longest first: every length up to ``dense_n``, beyond it only
    doublings of it, and ``max_n`` (``dense_n`` = 4, ``max_n`` = 16: 1, 2, 3, 4, 8, 16; ``max_n`` = 12: ..., 8, 12). ``weak_cap``: when set, a match
    of n tokens proposes at most ``weak_cap << (n - 1)`` tokens (short drafts on weak evidence); None = up
    to k."""

    min_n: int = 1
    max_n: int = 16
    weak_cap: int | None = None
    dense_n: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.min_n <= self.max_n:
            raise ValueError("need 1 <= min_n <= max_n")
        if self.weak_cap is not None and self.weak_cap < 1:
            raise ValueError("weak_cap must be >= 1 or None")
        if self.dense_n < 1:
            raise ValueError("dense_n must be >= 1")

    @property
    def sizes(self) -> tuple[int, ...]:
        """The suffix lengths indexed, ascending."""
        sizes = list(range(self.min_n, min(self.max_n, self.dense_n) + 1)) or [self.min_n]
        while sizes[-1] * 2 <= self.max_n:
            sizes.append(sizes[-1] * 2)
        if sizes[-1] != self.max_n:
            sizes.append(self.max_n)
        return tuple(sizes)


class NgramProposer(Proposer):
    """Proposes the continuation of the latest earlier occurrence of the longest matching suffix of
    prompt + output (see the module docstring for an example)."""

    source = "ngram"

    def __init__(self, context_ids: Sequence[int] = (), min_n: int = 1, max_n: int = 16,
                 weak_cap: int | None = None, dense_n: int = 4):
        self.config = NgramConfig(min_n, max_n, weak_cap, dense_n)
        self._sizes = self.config.sizes
        self._longest_first = self._sizes[::-1]
        self._tokens: list[int] = list(map(int, context_ids))
        # The context's n-grams are searched in arrays of their hashes (built at once, a few vector operations)
        # instead of entered in the dictionary one by one: a 1,500-token prompt took 1.5 ms to index that way,
        # the bulk of a new request's first proposal (8 new requests' first vLLM step, 20 of 28 ms).
        self._context = _ContextGrams(self._tokens, self._sizes, self._HASH_BASE)
        self._follow: dict[tuple[int, ...], int] = {}  # n-gram -> index right after its latest occurrence
        self._match: tuple[int, int] | None = None  # cached (start, n) for the current suffix

    # odd 64-bit multiplier of the context's n-gram hash, drawn per process so that no prompt can be crafted to
    # collide (a collision costs only a token check, but many would cost many); tests set a colliding one
    _HASH_BASE = secrets.randbits(64) | 1

    @property
    def observed(self) -> int:
        """Tokens seen so far: the context and every token observed since."""
        return len(self._tokens)

    @property
    def match_length(self) -> int:
        """Length of the suffix n-gram the next draft continues (0 when there is none)."""
        return self._lookup()[1]

    def context(self) -> str:
        """``ngram/n`` for a match of n tokens, n > 4 counted as 4 (longer matches continue correctly more
        often; past 4 tokens a match is about as reliable, and the estimates share their evidence)."""
        return f"ngram/{min(self.match_length, CONTEXT_CAP)}"

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
        old = len(seq)
        seq.extend(int(token) for token in tokens)
        if len(seq) == old:
            return
        # each n-gram ending right before ``end`` (old <= end < len) is now followed by seq[end]; later ends
        # overwrite earlier ones (and are later than any of the context's). The n-grams are built by zipping n
        # shifted slices (tuples made in C).
        for n in self._sizes:
            first = max(n, old)
            if first < len(seq):
                grams = zip(*[seq[first - n + j:len(seq) - n + j] for j in range(n)])
                follow.update(zip(grams, range(first, len(seq))))
        self._match = None

    def continuation(self, after: Sequence[int], k: int, min_n: int = 8) -> list[int]:
        """What followed the latest occurrence of the last tokens of (context + ``after``), a hypothetical
        context the output has not reached yet: at most ``k`` tokens, from a match of at least ``min_n``
        tokens (else none). E.g. after a draft that ends where the prediction ends, the prompt's copy of the
        file is followed by its closing fence."""
        tail = list(after[-self.config.max_n:])
        if len(tail) < self.config.max_n:
            tail = self._tokens[len(self._tokens) - (self.config.max_n - len(tail)):] + tail
        start, n = self._longest(tail, min_n)
        return self._tokens[start:start + k] if n else []

    def _longest(self, seq: Sequence[int], min_n: int = 1) -> tuple[int, int]:
        """(start of the continuation, n) for the longest suffix of ``seq`` (n >= ``min_n``) with an indexed
        occurrence, else (0, 0). Occurrences after the context (in the dictionary) are later than the
        context's, so at equal length they win."""
        found = 0, 0
        for n in self._longest_first:
            if min_n <= n <= len(seq):
                start = self._follow.get(tuple(seq[len(seq) - n:]))
                if start is not None:
                    found = start, n
                    break
        in_context = self._context.longest(seq, max(min_n, found[1] + 1))
        return in_context if in_context[1] > found[1] else found

    def _lookup(self) -> tuple[int, int]:
        """(start of the continuation, n) for the longest suffix with an earlier occurrence, else (0, 0)."""
        if self._match is None:
            self._match = self._longest(self._tokens)
        return self._match


class _ContextGrams:
    """The n-grams of a fixed context that have a continuation in it, found by hash: per indexed length n, an
    array of the hashes of the n-grams starting at 0 .. len - n - 1 (h = sum of token_j * base^(n-1-j) mod
    2^64), built with a few vector operations.

    :meth:`longest` finds the longest suffix of a sequence that occurs there, and the index right after its
    latest occurrence. It scans the array of the longest length asked (a copy matches there); failing that,
    the shortest one, and each longer length checks only the hits of the one before, moved back by the
    difference (an n-gram's occurrence ends where one of its suffix's does). Hits are checked token by
    token, so a hash collision only costs a check.

    Example: context [1, 2, 3, 1, 2]: longest([7, 1, 2]) == (2, 2) (the occurrence at 3-4 has no continuation
    yet), longest([2, 3]) == (3, 2), longest([3, 2]) == (2, 1).
    """

    def __init__(self, tokens: list[int], sizes: Sequence[int], base: int):
        self._tokens = tokens  # only its first len(tokens) entries are read, so the owner may append
        self._base = base
        self._sizes = tuple(sorted(sizes))
        ids = np.asarray(tokens, dtype=np.uint64)
        self._hashes: dict[int, np.ndarray] = {}
        rolling, length = ids, 1  # rolling[s] = hash of ids[s:s + length]
        for n in self._sizes:
            while length < n:
                rolling = rolling[:-1] * np.uint64(base) + ids[length:]
                length += 1
            if len(ids) > n:
                self._hashes[n] = rolling[:len(ids) - n]

    def longest(self, seq: Sequence[int], min_n: int = 1) -> tuple[int, int]:
        """(index after the latest occurrence, n) of the longest suffix of ``seq`` of an indexed length
        n >= ``min_n`` that occurs with a continuation, else (0, 0)."""
        sizes = [n for n in self._sizes if min_n <= n <= len(seq) and n in self._hashes]
        if not sizes:
            return 0, 0
        top = sizes[-1]  # a copy matches at the longest length: one scan finds it
        found = self._latest(seq, top, np.flatnonzero(self._hashes[top] == self._key(seq, top)))
        if found is not None:
            return found, top
        levels: list[tuple[int, np.ndarray]] = []  # (n, starts whose n-gram hash matches seq's n-suffix)
        for n in sizes[:-1]:
            hashes, key = self._hashes[n], self._key(seq, n)
            if not levels:
                starts = np.flatnonzero(hashes == key)
            else:
                starts = levels[-1][1] - (n - levels[-1][0])
                starts = starts[starts >= 0]
                starts = starts[hashes[starts] == key]
            if not len(starts):
                break
            levels.append((n, starts))
        for n, starts in reversed(levels):  # the longest first
            found = self._latest(seq, n, starts)
            if found is not None:
                return found, n
        return 0, 0

    def _latest(self, seq: Sequence[int], n: int, starts: np.ndarray) -> int | None:
        """The index after the latest of ``starts`` whose n tokens are ``seq``'s last n (hash hits, checked;
        the latest is almost always a true one), else None."""
        gram = list(seq[len(seq) - n:])
        for i in range(len(starts) - 1, -1, -1):
            start = int(starts[i])
            if self._tokens[start:start + n] == gram:
                return start + n
        return None

    def _key(self, seq: Sequence[int], n: int) -> np.uint64:
        return np.uint64(self._hash(seq[len(seq) - n:]))

    def _hash(self, gram: Sequence[int]) -> int:
        h = 0
        for token in gram:
            h = (h * self._base + int(token)) & 0xFFFFFFFFFFFFFFFF
        return h
