"""KV memory: one growable buffer per sequence, written by position, so rollback is free.

Each sequence owns a :class:`SeqKV`: per layer a key and a value tensor ``[kv_heads, capacity, head_dim]``.
New keys/values are written at their positions; ``length`` says how many positions are valid, so rejecting
draft tokens is just not advancing ``length`` (later tokens overwrite the rejected positions). Where foretell's
CPU attention reads fp32 caches, each layer's keys are also kept transposed tile by tile (``tiles``), so a pass
transposes only its new keys (``tiles_valid``: the leading positions whose tiles hold the keys as they are).

:class:`KVPool` does the accounting against a token budget and keeps finished sequences' buffers as a
prefix cache (longest-common-prefix reuse, least recently used evicted first).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class KVShape:
    num_layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype
    device: torch.device
    key_tile: int = 0  # keys a tile of the transposed keys holds (CpuGemm.key_tile); 0: none kept

    @property
    def bytes_per_token(self) -> int:
        tiles = self.num_layers * self.kv_heads * self.head_dim * 4 if self.key_tile else 0  # fp32
        return 2 * self.num_layers * self.kv_heads * self.head_dim * torch.finfo(self.dtype).bits // 8 + tiles


class SeqKV:
    """Keys and values of one sequence, all layers; grows by doubling up to ``max_capacity``."""

    def __init__(self, shape: KVShape, capacity: int, max_capacity: int):
        self.shape = shape
        self.max_capacity = max_capacity
        self.capacity = 0
        self.length = 0  # valid positions
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.tiles: list[torch.Tensor] = []  # per layer [kv_heads, tiles, head_dim, key_tile] fp32 (shape.key_tile)
        self.tiles_valid = 0  # positions [0, tiles_valid) of the tiles hold the keys there
        self.ensure(capacity)

    def ensure(self, needed: int) -> None:
        """Grow the buffers so positions ``[0, needed)`` can be written."""
        if needed <= self.capacity:
            return
        if needed > self.max_capacity:
            raise ValueError(f"KV capacity {self.max_capacity} exceeded ({needed})")
        s = self.shape
        new_cap = max(needed, 2 * self.capacity, 64)
        if s.key_tile:  # whole tiles: the tiled keys hold exactly the capacity (KVPool's reservations are whole too)
            new_cap = -(-new_cap // s.key_tile) * s.key_tile
        new_cap = min(self.max_capacity, new_cap)
        self.keys = [self._grown(t, new_cap) for t in self.keys] or [
            torch.empty(s.kv_heads, new_cap, s.head_dim, dtype=s.dtype, device=s.device) for _ in range(s.num_layers)
        ]
        self.values = [self._grown(t, new_cap) for t in self.values] or [
            torch.empty(s.kv_heads, new_cap, s.head_dim, dtype=s.dtype, device=s.device) for _ in range(s.num_layers)
        ]
        if s.key_tile:
            count = -(-new_cap // s.key_tile)
            grown = [torch.empty(s.kv_heads, count, s.head_dim, s.key_tile, dtype=torch.float32, device=s.device)
                     for _ in range(s.num_layers)]
            kept = -(-self.tiles_valid // s.key_tile)
            for new, old in zip(grown, self.tiles):
                new[:, :kept] = old[:, :kept]
            self.tiles = grown
        self.capacity = new_cap

    def _grown(self, t: torch.Tensor, new_cap: int) -> torch.Tensor:
        bigger = torch.empty(t.shape[0], new_cap, t.shape[2], dtype=t.dtype, device=t.device)
        bigger[:, : self.length] = t[:, : self.length]
        return bigger

    def copy_prefix_from(self, other: "SeqKV", n: int) -> None:
        self.ensure(n)
        for dst, src in zip(self.keys + self.values, other.keys + other.values):
            dst[:, :n] = src[:, :n]
        self.length = n
        self.tiles_valid = min(n, other.tiles_valid) if self.tiles and other.tiles else 0
        count = -(-self.tiles_valid // self.shape.key_tile) if self.tiles_valid else 0
        for dst, src in zip(self.tiles, other.tiles):
            dst[:, :count] = src[:, :count]

    @torch.inference_mode()  # the buffers are inference tensors (grown inside the forward pass)
    def move(self, slots: list[int], dst: int) -> None:
        """Copy the keys/values at ``slots`` to the contiguous slots from ``dst`` (the accepted path of a
        token tree, laid out elsewhere in the pass, into place)."""
        index = torch.tensor(slots, device=self.shape.device)
        for t in self.keys + self.values:
            t[:, dst : dst + len(slots)] = t[:, index]
        self.tiles_valid = min(self.tiles_valid, dst)

    @property
    def nbytes(self) -> int:
        return self.capacity * self.shape.bytes_per_token


@dataclass
class CacheEntry:
    tokens: np.ndarray  # the token ids whose KV is in ``kv`` (kv.length == len(tokens))
    kv: SeqKV
    reusable: int  # leading positions a new request may take (all of them, except with ``reuse_align``)
    kernel_from: int = 0  # with ``reuse_align``: every position from here on was computed on the kernel
    prompt_len: int = 0  # the prompt it was computed for (its chunks' bounds), 0 if unknown


class KVPool:
    """Token-budget accounting for running sequences plus an LRU prefix cache of finished ones.

    A running sequence *reserves* the most positions it can use (prompt + max_tokens + draft headroom,
    capped at the context length) when admitted, so a running request never runs out of KV mid-way (its
    buffers grow by doubling but never past the reservation). Cached prefixes count at the capacity their
    buffers hold in memory (up to twice their length, as buffers grow by doubling), not at their length,
    and are evicted (least recently used first) to make room.
    """

    def __init__(self, shape: KVShape, budget_tokens: int, max_seq_capacity: int, prefix_cache: bool = True,
                 reuse_align: int | None = None, kernel_rows: int = 0):
        """``reuse_align`` (exact mode): prompts are computed in chunks that never cross a multiple of this size;
        a chunk's keys/values depend on its bounds, unless it has at most ``kernel_rows`` rows before the prompt's
        last token and so runs on the kernel, each row alone, as decode steps do (:meth:`kernel_start`). A reused
        position's keys/values are those a fresh request would compute: from the same whole chunk on the library
        GEMM, or, in a prompt's last chunk on the kernel, from any computation on the kernel; and for the very prompt
        of a cached entry (up to its last token), all of it: its chunks have the same bounds again."""
        self.shape = shape
        self.reuse_align = reuse_align
        self.kernel_rows = kernel_rows
        self.budget_tokens = budget_tokens
        self.max_seq_capacity = max_seq_capacity
        self.prefix_cache_enabled = prefix_cache
        self.reserved: dict[str, int] = {}
        self.cache: OrderedDict[int, CacheEntry] = OrderedDict()
        self._next_entry = 0

    # -- accounting -------------------------------------------------------------------------------
    @property
    def reserved_tokens(self) -> int:
        return sum(self.reserved.values())

    @property
    def cached_tokens(self) -> int:
        """Token positions the prefix cache holds in memory (its buffers' capacity)."""
        return sum(e.kv.capacity for e in self.cache.values())

    @property
    def used_tokens(self) -> int:
        return self.reserved_tokens + self.cached_tokens

    def can_admit(self, reserve: int) -> bool:
        return self.reserved_tokens + self._whole_tiles(reserve) <= self.budget_tokens

    def _whole_tiles(self, reserve: int) -> int:
        """A reservation in positions: whole tiles of the tiled keys where the shape keeps them."""
        tile = self.shape.key_tile
        return -(-reserve // tile) * tile if tile else reserve

    def allocate(self, seq_id: str, reserve: int, prompt: list[int], reuse: bool = True) -> tuple[SeqKV, int]:
        """Reserve KV for a sequence; returns its buffers and how many prompt positions are already filled
        from the prefix cache (at most ``len(prompt) - 1``: the last prompt token is always recomputed; none
        without ``reuse``)."""
        reserve = self._whole_tiles(reserve)
        self._evict_until_fits(reserve)
        self.reserved[seq_id] = reserve
        kv = SeqKV(self.shape, capacity=min(len(prompt) + 64, reserve), max_capacity=reserve)
        entry = self._longest_prefix(prompt) if reuse else None
        reused = 0
        if entry is not None:
            reused = min(_common_prefix(entry.tokens, prompt), len(prompt) - 1)
            if self.reuse_align and not self._same_chunks(entry, prompt, reused):
                start = self.kernel_start(len(prompt))
                whole = min(reused, entry.reusable, start)
                whole -= whole % self.reuse_align
                if whole < start or entry.kernel_from > start:
                    reused = whole
            if reused > 0:
                kv.copy_prefix_from(entry.kv, reused)
        return kv, reused

    @staticmethod
    def _same_chunks(entry: CacheEntry, prompt: list[int], reused: int) -> bool:
        """Whether ``prompt`` is the entry's own prompt up to its last token: then a fresh request computes every
        position before that token in chunks of the very bounds the entry's were computed in, so all of them are
        reusable (a retried or repeated request, or the same prompt with and without a prediction)."""
        return entry.prompt_len == len(prompt) and reused == len(prompt) - 1

    def kernel_start(self, prompt_len: int) -> int:
        """With ``reuse_align``: the position from which a fresh request with a prompt of this length computes
        every position on the kernel (its last chunk, or only its last token, then its output)."""
        align, last = self.reuse_align or 1, prompt_len - 1
        if self.kernel_rows >= align:
            return 0
        start = last - last % align
        return start if last - start <= self.kernel_rows else last

    def release(self, seq_id: str, kv: SeqKV | None, tokens: list[int] | None, prompt_len: int | None = None) -> None:
        """Free a sequence's reservation; with ``tokens`` its KV is kept as a prefix-cache entry. With
        ``reuse_align``, the whole chunks the library GEMM computed are reusable, and from ``kernel_start`` on
        what the kernel computed (the prompt's last chunk on the kernel, its last token, decode steps)."""
        self.reserved.pop(seq_id, None)
        if kv is None or tokens is None or not self.prefix_cache_enabled or kv.length == 0:
            return
        kept = np.asarray(tokens[: kv.length], dtype=np.int64)
        for key, entry in list(self.cache.items()):  # an entry that is a prefix of this one adds nothing
            n = len(entry.tokens)
            if n <= len(kept) and _common_prefix(entry.tokens, kept) == n:
                del self.cache[key]
        reusable, kernel_from = len(kept), 0
        if self.reuse_align:
            kernel_from = self.kernel_start(max(1, prompt_len or 0))
            reusable = min(reusable, kernel_from) // self.reuse_align * self.reuse_align
        self.cache[self._next_entry] = CacheEntry(kept, kv, reusable, kernel_from, prompt_len or 0)
        self._next_entry += 1
        self._evict_until_fits(0)

    def clear_cache(self) -> None:
        self.cache.clear()

    # -- internals --------------------------------------------------------------------------------
    def _evict_until_fits(self, extra: int) -> None:
        while self.cache and self.used_tokens + extra > self.budget_tokens:
            self.cache.popitem(last=False)

    def _longest_prefix(self, prompt: list[int]) -> CacheEntry | None:
        if not self.cache or not self.prefix_cache_enabled:
            return None
        p = np.asarray(prompt, dtype=np.int64)
        best_key, best_len = None, 0
        for key, entry in self.cache.items():
            n = _common_prefix(entry.tokens, p)
            if n > best_len:
                best_key, best_len = key, n
        if best_key is None:
            return None
        self.cache.move_to_end(best_key)
        return self.cache[best_key]


def _common_prefix(a: np.ndarray, b) -> int:
    b = np.asarray(b, dtype=np.int64)
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n
