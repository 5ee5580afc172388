"""Per-chunk provenance for streams (an opt-in extension): which spans of a text delta came from the prediction.

The engine flags every output token (``RequestOutput.from_prediction``) but streams text, not tokens: a
character split across tokens appears only once complete, and text that could start a stop string is held
back. So each choice keeps a *tape*: the text its tokens decode to, token by token, with the same
incremental detokeniser the engine uses (so the same text), cut into runs of equal provenance. Every text
delta the stream sends is the tape's next stretch; its spans are read off the runs it covers.

A character whose bytes span several tokens counts as predicted only when all of those tokens were.
"""

from __future__ import annotations

from dataclasses import dataclass

from foretell.engine.api import RequestOutput
from foretell.engine.detok import IncrementalDetokenizer


@dataclass
class _Run:
    end: int  # exclusive end offset in the choice's text (the run starts where the previous one ends)
    from_prediction: bool


class ProvenanceTape:
    """One choice's text with per-character provenance, consumed delta by delta."""

    def __init__(self, tokenizer):
        self.detok = IncrementalDetokenizer(tokenizer)
        self.runs: list[_Run] = []
        self.length = 0  # characters decoded so far
        self.emitted = 0  # characters already handed out by ``spans``
        self._pending = True  # AND of the flags of tokens whose bytes are still incomplete

    def add(self, out: RequestOutput) -> None:
        """Decode one engine output's new tokens onto the tape."""
        for token, flag in zip(out.new_token_ids, out.from_prediction):
            piece = self.detok.add(token)
            flag = bool(flag) and self._pending
            if not piece:
                self._pending = flag
                continue
            self._pending = True
            self.length += len(piece)
            if self.runs and self.runs[-1].from_prediction == flag:
                self.runs[-1].end = self.length
            else:
                self.runs.append(_Run(self.length, flag))

    def spans(self, text: str) -> list[dict]:
        """Provenance of ``text``, the stream's next delta: ``[{"text", "from_prediction"}]`` whose texts
        concatenate to ``text``. Text beyond the tape (never expected) is reported as not predicted."""
        out: list[dict] = []
        start, pos = self.emitted, 0
        while pos < len(text):
            run = self._run_at(start + pos)
            take = len(text) - pos if run is None else min(len(text) - pos, run.end - (start + pos))
            flag = False if run is None else run.from_prediction
            if out and out[-1]["from_prediction"] == flag:
                out[-1]["text"] += text[pos : pos + take]
            else:
                out.append({"text": text[pos : pos + take], "from_prediction": flag})
            pos += take
        self.emitted += len(text)
        self._drop_before(self.emitted)
        return out

    def _run_at(self, offset: int) -> _Run | None:
        for run in self.runs:
            if offset < run.end:
                return run
        return None

    def _drop_before(self, offset: int) -> None:
        """Forget runs wholly before ``offset`` (keeps the scan in ``_run_at`` short)."""
        keep = 0
        while keep < len(self.runs) - 1 and self.runs[keep].end <= offset:
            keep += 1
        del self.runs[:keep]
