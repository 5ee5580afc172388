"""Detokenisation: the engine's text decoder goes straight through the Rust tokenizer where that is exactly what
transformers' ``decode`` would do, and falls back to ``decode`` wherever a tokenizer could do more."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foretell.engine.detok import IncrementalDetokenizer, text_decoder
from foretell.testing import make_tiny_tokenizer

TOKENIZER = make_tiny_tokenizer()
IDS = st.lists(st.integers(0, len(TOKENIZER) - 1), max_size=40)


@settings(max_examples=200, deadline=None)
@given(IDS)
def test_the_fast_decoder_equals_transformers_decode(ids):
    """Special tokens (skipped), multi-byte characters split across tokens (U+FFFD), anything."""
    assert text_decoder(TOKENIZER)(ids) == TOKENIZER.decode(ids, skip_special_tokens=True)


@settings(max_examples=100, deadline=None)
@given(IDS)
def test_incremental_deltas_add_up_to_the_decoded_text(ids):
    detok = IncrementalDetokenizer(TOKENIZER)
    text = "".join(detok.add(i) for i in ids)
    full = TOKENIZER.decode(ids, skip_special_tokens=True)
    assert full.startswith(text) and full[len(text):].strip("\ufffd") == ""  # only a partial character held back


def test_the_fast_path_skips_transformers_and_falls_back_where_decode_could_differ(monkeypatch):
    tok = make_tiny_tokenizer()
    ids = tok.encode("def add(a, b): return a + b")
    expected = tok.decode(ids, skip_special_tokens=True)

    def refuse(*args, **kwargs):
        raise AssertionError("transformers' decode called")

    monkeypatch.setattr(tok, "decode", refuse)
    assert text_decoder(tok)(ids) == expected  # the Rust tokenizer alone

    class OwnDecode(type(tok)):
        def decode(self, token_ids, skip_special_tokens=False, **kwargs):
            return "own"

    tok.__class__ = OwnDecode
    monkeypatch.undo()
    assert text_decoder(tok)(ids) == "own"  # a tokenizer class with its own decode keeps it
    tok.__class__ = OwnDecode.__mro__[1]
    monkeypatch.setattr(tok, "clean_up_tokenization_spaces", True)  # the tokenizer is shared (cached): undone after
    calls = []
    monkeypatch.setattr(tok, "decode", lambda ids, **kw: calls.append(kw) or "cleaned")
    assert text_decoder(tok)(ids) == "cleaned" and calls == [{"skip_special_tokens": True}]


def test_the_real_tokenizer_takes_the_fast_path_with_the_same_text():
    """Qwen2.5's tokenizer (where the converted default model is cached): same text for a mixed sample."""
    from foretell.paths import cache_dir

    path = cache_dir() / "models" / "qwen2.5-coder-0.5b-instruct-bf16"
    if not (path / "tokenizer.json").exists():
        pytest.skip("the default model is not converted here")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    ids = tok.encode("<|im_start|>user\nnaïve café — 東京 🐍\n```python\ndef f(x):\n    return x\n```<|im_end|>")
    decode = text_decoder(tok)
    for end in range(len(ids) + 1):
        assert decode(ids[:end]) == tok.decode(ids[:end], skip_special_tokens=True)
