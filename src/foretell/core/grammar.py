"""Structured outputs: a reply held to a JSON schema by masking the target's logits (llguidance).

A request's ``SamplingParams.json_schema`` (OpenAI's ``response_format``: ``json_object`` is the schema
``{"type": "object"}``) is compiled once per schema into a grammar; each request gets a :class:`Grammar`, a
matcher that follows the tokens the request emits. Before a token is chosen, every token the grammar does not
allow next gets logit −inf (:func:`foretell.core.sampling.penalize`), so greedy decoding and sampling pick among
allowed tokens only, and the end-of-sequence token is allowed once the JSON is complete.

Speculation stays lossless: in a verify pass row j is masked as if the draft's first j tokens had been emitted
(the matcher consumes them, computes each row's mask and rolls back), which is the mask plain decoding would
have applied at that position; a draft token the grammar does not allow ends the draft's accepted prefix there,
as any token the target would not have chosen does.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Sequence

import numpy as np
import torch

# JSON compiler options: whitespace as the model writes it (``{"a": 1}`` and pretty-printed), as vLLM's default.
JSON_OPTIONS = {"whitespace_flexible": True}


class GrammarError(ValueError):
    """The schema cannot be compiled (the message says why)."""


class GrammarCompiler:
    """Compiles JSON schemas for one tokenizer (its llguidance view is built on first use, ~1 s for a 152k
    vocabulary) and makes per-request :class:`Grammar` matchers. ``vocab_size``: the width of the model's logits."""

    def __init__(self, tokenizer, vocab_size: int, cache_size: int = 64):
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.cache_size = cache_size
        self._ll_tokenizer = None
        self._grammars: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.RLock()  # the server validates in its thread, the engine builds matchers in its own

    @property
    def ll_tokenizer(self):
        with self._lock:
            if self._ll_tokenizer is None:
                import llguidance.hf

                self._ll_tokenizer = llguidance.hf.from_tokenizer(self.tokenizer, max(self.vocab_size, len(self.tokenizer)))
            return self._ll_tokenizer

    def warm(self) -> threading.Thread:
        """Build the tokenizer's llguidance view in a background thread (a server calls this once it is up, so
        that its first JSON request does not wait ~1.4 s with the event loop held)."""
        thread = threading.Thread(target=lambda: self.ll_tokenizer, name="foretell-grammar-warm", daemon=True)
        thread.start()
        return thread

    def grammar(self, json_schema: str) -> str:
        """The compiled grammar of ``json_schema`` (a JSON schema's text); raises :class:`GrammarError`."""
        with self._lock:
            return self._compile(json_schema)

    def _compile(self, json_schema: str) -> str:
        found = self._grammars.get(json_schema)
        if found is not None:
            self._grammars.move_to_end(json_schema)
            return found
        import llguidance

        try:  # any failure here is the schema's: llguidance's own limits bound the work
            grammar = llguidance.LLMatcher.grammar_from_json_schema(json_schema, defaults=JSON_OPTIONS)
            error = llguidance.LLMatcher.validate_grammar(grammar, self.ll_tokenizer)
        except Exception as exc:
            raise GrammarError(f"not a JSON schema llguidance can read: {exc}") from None
        if error and not error.startswith("WARNING"):
            raise GrammarError(f"the JSON schema cannot be enforced: {error}")
        self._grammars[json_schema] = grammar
        while len(self._grammars) > self.cache_size:
            self._grammars.popitem(last=False)
        return grammar

    def matcher(self, json_schema: str) -> "Grammar":
        import llguidance

        matcher = llguidance.LLMatcher(self.ll_tokenizer, self.grammar(json_schema), log_level=0)
        if matcher.is_error():
            raise GrammarError(f"the JSON schema cannot be enforced: {matcher.get_error()}")
        return Grammar(matcher, self.ll_tokenizer.vocab_size, self.ll_tokenizer.eos_token)


class Grammar:
    """One request's matcher: which tokens may come next, given the tokens emitted so far and a draft."""

    def __init__(self, matcher, size: int, eos: int | None = None):
        self.matcher = matcher
        self.size = size  # tokens the masks cover
        self.eos = eos  # a draft's end-of-sequence token is not consumed (the reply ends there)

    def allowed(self, draft_tokens: Sequence[int], rows: int, width: int) -> torch.Tensor:
        """bool[rows, width]: row j allows what may follow the output plus ``draft_tokens[:j]``. Rows after a
        draft token the grammar refuses allow everything (they are never used: the draft is rejected there)."""
        import llguidance.numpy as llg_numpy

        bitmask = llg_numpy.allocate_token_bitmask(rows, self.size)
        bitmask[:] = -1
        consumed = 0
        for j in range(rows):
            llg_numpy.fill_next_token_bitmask(self.matcher, bitmask, j)
            if j == rows - 1 or j >= len(draft_tokens) or draft_tokens[j] == self.eos:
                break
            if not self._allows(bitmask[j], draft_tokens[j]):
                break
            if not self.matcher.consume_token(int(draft_tokens[j])):
                break
            consumed += 1
        if consumed:
            self.matcher.rollback(consumed)
        return torch.from_numpy(_unpack(bitmask, width))

    def greedy_choices(self, logits: torch.Tensor, draft_tokens: Sequence[int], raw: torch.Tensor) -> torch.Tensor:
        """Greedy verification's choices without masking whole rows: ``raw`` is each row's argmax of the
        unmasked ``logits`` (CPU); where the grammar allows it, it is also the masked argmax (every allowed
        token before it is smaller, as it is the first maximum), and only the other rows are masked, one at a
        time. Rows after the first choice that differs from the draft are left as ``raw`` (never read). The same
        choices as ``argmax(penalize(...))`` for the rows that count, for a fraction of the time: a [64, 152k]
        mask filled in costs ~20 ms on a 2-core EPYC, its argmax pass is paid anyway."""
        import llguidance.numpy as llg_numpy

        rows, width = logits.shape
        choices = raw.clone()
        bitmask = llg_numpy.allocate_token_bitmask(1, self.size)
        consumed = 0
        for j in range(rows):
            llg_numpy.fill_next_token_bitmask(self.matcher, bitmask, 0)
            if not self._allows(bitmask[0], int(raw[j])):
                row = logits[j].float().numpy()
                choices[j] = int(np.where(_unpack(bitmask, width)[0], row, -np.inf).argmax())
            token = int(choices[j])
            if j >= len(draft_tokens) or token != draft_tokens[j] or token == self.eos:
                break
            if not self.matcher.consume_token(token):
                break
            consumed += 1
        if consumed:
            self.matcher.rollback(consumed)
        return choices

    @staticmethod
    def _allows(mask_row: np.ndarray, token: int) -> bool:
        word, bit = divmod(int(token), 32)
        return 0 <= word < len(mask_row) and bool((int(mask_row[word]) >> bit) & 1)

    def observe(self, tokens: Sequence[int]) -> None:
        """Follow the emitted tokens (each was allowed; the end-of-sequence token stops the matcher)."""
        if not self.matcher.is_stopped():
            self.matcher.consume_tokens([int(t) for t in tokens])


def _unpack(bitmask: np.ndarray, width: int) -> np.ndarray:
    """bool[rows, width] from llguidance's int32 bitmask rows; tokens past the mask (a head wider than the
    tokenizer: padding rows) are never allowed."""
    bits = np.unpackbits(bitmask.view(np.uint8), axis=1, bitorder="little")[:, :width].astype(bool)
    return bits if bits.shape[1] == width else np.pad(bits, ((0, 0), (0, width - bits.shape[1])))


def schema_text(schema: dict) -> str:
    """A schema's compact text (the compiler's cache key). Keys keep their order: llguidance writes an object's
    properties in the order the schema lists them, as OpenAI's structured outputs do."""
    return json.dumps(schema, separators=(",", ":"))
