"""Token ids → text, in one place for the engine, the server and the CLI.

- :class:`IncrementalDetokenizer`: output text token by token, exactly as plain decoding would see it; the
  engine runs one per request and hands each token's text delta out with its outputs
  (``RequestOutput.token_texts``), which the server uses for logprob text offsets and the CLI for colouring;
- :class:`StopStringMatcher`: stop strings over those deltas;
- :class:`TokenTexts`: one token's own string and exact bytes, as OpenAI's logprobs report them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable


class IncrementalDetokenizer:
    """Turns output token ids into text deltas, each the complete characters a token added.

    Decoding runs over a short window of ids (``prefix_offset``..) and diffs against the window's text so
    far, so tokenizers whose text depends on the neighbouring token (SentencePiece spaces) come out right.
    A token that ends mid-character (the decode ends in U+FFFD) emits the characters it completed and holds
    the partial bytes back (``held`` counts characters already emitted past ``read_offset``), so the deltas'
    lengths add up to each token's offset in the text (OpenAI's ``text_offset``).
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.decode = text_decoder(tokenizer)
        self.ids: list[int] = []
        self.prefix_offset = 0
        self.read_offset = 0
        self.held = 0

    def add(self, token_id: int) -> str:
        self.ids.append(token_id)
        decode = self.decode
        prefix = decode(self.ids[self.prefix_offset : self.read_offset])
        full = decode(self.ids[self.prefix_offset :])
        start = len(prefix) + self.held
        if not full.endswith("\ufffd"):
            if len(full) <= len(prefix):
                return ""
            self.prefix_offset, self.read_offset, self.held = self.read_offset, len(self.ids), 0
            return full[start:]
        complete = full.rstrip("\ufffd")
        if len(complete) <= start:
            return ""
        self.held = len(complete) - len(prefix)
        return complete[start:]


def text_decoder(tokenizer) -> Callable[[list[int]], str]:
    """``tokenizer.decode(ids, skip_special_tokens=True)``, straight through the Rust tokenizer where transformers'
    ``decode`` would do nothing more than call it: a fast tokenizer whose class keeps transformers' own ``decode``
    and ``_decode``, with no space clean-up. The engine decodes twice per output token, and transformers' checks
    of the ids (``to_py_obj``) took several times the decode itself: a quarter of an engine step's own time with
    8 requests on a tiny model, what a step costs beside a GPU's pass."""
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # another transformers layout: its own decode
        return lambda ids: tokenizer.decode(ids, skip_special_tokens=True)
    backend, cls = getattr(tokenizer, "_tokenizer", None), type(tokenizer)
    if (isinstance(tokenizer, TokenizersBackend) and backend is not None and cls._decode is TokenizersBackend._decode
            and cls.decode is PreTrainedTokenizerBase.decode and not tokenizer.clean_up_tokenization_spaces):
        return lambda ids: backend.decode(ids, skip_special_tokens=True)
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=True)


class StopStringMatcher:
    """Accumulates text and finds the first stop string; text that could still become the start of a stop
    string is held back until it is resolved, so streamed text never shows part of a stop string."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops = stops
        self.longest = max((len(s) for s in stops), default=0)
        self.text = ""
        self.emitted = 0
        self.stopped = False

    def add(self, delta: str) -> bool:
        """Append text; returns True when a stop string completed (the text is cut before it)."""
        if not delta or self.stopped:
            return self.stopped
        search_from = max(0, len(self.text) - self.longest + 1)
        self.text += delta
        hits = [i for i in (self.text.find(s, search_from) for s in self.stops) if i >= 0]
        if hits:
            self.text = self.text[: min(hits)]
            self.stopped = True
        return self.stopped

    def take(self, final: bool) -> str:
        """Text not yet emitted, minus a possible partial stop string unless ``final``."""
        end = len(self.text) if (final or self.stopped) else len(self.text) - self._partial_stop_suffix()
        out = self.text[self.emitted : end]
        self.emitted = max(self.emitted, end)
        return out

    def _partial_stop_suffix(self) -> int:
        for n in range(min(self.longest - 1, len(self.text)), 0, -1):
            tail = self.text[-n:]
            if any(s.startswith(tail) for s in self.stops):
                return n
        return 0


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
