"""Token ids → the strings and bytes OpenAI's logprobs report, and per-token text for the CLI's --show.

Response text itself comes from the engine (``RequestOutput.new_text``, stop strings already cut).
"""

from __future__ import annotations

import re
from functools import lru_cache

_HEX_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte ↔ printable-unicode table, inverted (byte-level BPE vocabularies use it)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _is_byte_level(tokenizer) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend is not None and "ByteLevel" in type(backend.decoder).__name__ + repr(backend.decoder)[:40]


class TokenTexts:
    """Cached ``token_id → (text, bytes)`` for one tokenizer. ``bytes`` are the token's exact UTF-8 bytes
    (a character split across tokens gives partial bytes); ``text`` shows them, undecodable bytes escaped."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.byte_level = _is_byte_level(tokenizer)
        self.special = set(getattr(tokenizer, "all_special_ids", []) or [])
        self._cache: dict[int, tuple[str, list[int]]] = {}

    def get(self, token_id: int) -> tuple[str, list[int]]:
        hit = self._cache.get(token_id)
        if hit is None:
            raw = self._bytes(token_id)
            hit = (raw.decode("utf-8", errors="backslashreplace"), list(raw))
            if len(self._cache) < 500_000:
                self._cache[token_id] = hit
        return hit

    def text(self, token_id: int) -> str:
        return self.get(token_id)[0]

    def _bytes(self, token_id: int) -> bytes:
        piece = self.tokenizer.convert_ids_to_tokens(token_id)
        if piece is None:
            return b""
        if token_id in self.special:
            return piece.encode("utf-8")
        if self.byte_level:
            table = _byte_decoder()
            if all(c in table for c in piece):
                return bytes(table[c] for c in piece)
        m = _HEX_BYTE.match(piece)
        if m:  # SentencePiece byte fallback
            return bytes([int(m.group(1), 16)])
        if "\u2581" in piece:  # SentencePiece's word-start marker (decode() would drop a leading space)
            return piece.replace("\u2581", " ").encode("utf-8")
        return self.tokenizer.decode([token_id]).encode("utf-8")


def split_by_tokens(text: str, pieces: list[str]) -> list[str]:
    """Cut ``text`` into consecutive spans as long as each token's own text (the last span takes the
    rest; spans run empty once the text is used up). Used to colour a text delta token by token."""
    spans, pos = [], 0
    for i, piece in enumerate(pieces):
        end = len(text) if i == len(pieces) - 1 else min(len(text), pos + len(piece))
        spans.append(text[pos:end])
        pos = end
    return spans
