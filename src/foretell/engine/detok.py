"""Incremental detokenisation and stop strings, token by token, exactly as plain decoding would see them."""

from __future__ import annotations


class IncrementalDetokenizer:
    """Turns output token ids into text deltas; holds back bytes of a character split across tokens
    (a trailing U+FFFD means the last token ended mid-character)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix_offset = 0
        self.read_offset = 0

    def add(self, token_id: int) -> str:
        self.ids.append(token_id)
        decode = self.tokenizer.decode
        prefix = decode(self.ids[self.prefix_offset : self.read_offset], skip_special_tokens=True)
        full = decode(self.ids[self.prefix_offset :], skip_special_tokens=True)
        if len(full) > len(prefix) and not full.endswith("\ufffd"):
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
            return full[len(prefix) :]
        return ""


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
