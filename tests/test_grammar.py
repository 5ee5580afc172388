"""Structured outputs (``response_format``): the grammar's masks along a draft, and the engine held to a JSON schema
with and without predictions (tiny random-weight models, fp32: the outputs must be the same token for token)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import llguidance
import llguidance.numpy as llg_numpy

from foretell.config import SamplingParams
from foretell.core.grammar import GrammarCompiler, GrammarError, schema_text
from foretell.testing import make_tiny_model, make_tiny_tokenizer
from test_engine import make_engine, prompts, request, run

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "tag": {"enum": ["add", "snake", "fox"]}},
          "required": ["ok", "tag"], "additionalProperties": False}
VOCAB = 400


@pytest.fixture(scope="module")
def tokenizer():
    return make_tiny_tokenizer()


@pytest.fixture(scope="module")
def compiler(tokenizer):
    return GrammarCompiler(tokenizer, VOCAB)


def reference_mask(compiler, tokens) -> np.ndarray:
    """The mask after ``tokens``, from a fresh matcher fed them one by one (no rollback)."""
    matcher = llguidance.LLMatcher(compiler.ll_tokenizer, compiler.grammar(schema_text(SCHEMA)), log_level=0)
    assert matcher.consume_tokens(list(tokens))
    bitmask = llg_numpy.allocate_token_bitmask(1, compiler.ll_tokenizer.vocab_size)
    llg_numpy.fill_next_token_bitmask(matcher, bitmask, 0)
    return np.unpackbits(bitmask.view(np.uint8), axis=1, bitorder="little")[0, :VOCAB].astype(bool)


def test_each_row_sees_the_draft_before_it_and_the_matcher_is_left_as_it_was(compiler, tokenizer):
    doc = tokenizer.encode('{"ok": true, "tag": "snake"}', add_special_tokens=False)
    grammar = compiler.matcher(schema_text(SCHEMA))
    grammar.observe(doc[:2])
    before = grammar.allowed([], 1, VOCAB)[0].numpy()
    rows = grammar.allowed(doc[2:], len(doc) - 1, VOCAB).numpy()
    for j in range(len(doc) - 1):
        assert (rows[j] == reference_mask(compiler, doc[: 2 + j])).all(), j
    assert (grammar.allowed([], 1, VOCAB)[0].numpy() == before).all()  # rolled back
    assert not before.all() and before.any()


def test_rows_after_a_refused_draft_token_are_open_and_never_matter(compiler, tokenizer):
    grammar = compiler.matcher(schema_text(SCHEMA))
    x = tokenizer.encode("x", add_special_tokens=False)[0]  # a JSON object cannot start with x
    rows = grammar.allowed([x, x, x], 4, VOCAB).numpy()
    assert not rows[0][x] and rows[1:].all()
    assert (grammar.allowed([], 1, VOCAB)[0].numpy() == rows[0]).all()


def test_a_schema_that_cannot_be_enforced_is_refused(compiler):
    with pytest.raises(GrammarError):
        compiler.grammar(schema_text({"type": "object", "properties": {"a": {"type": "strnig"}}}))


# -- the engine ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["qwen2", "llama"])
def model(request):
    return make_tiny_model(arch=request.param, seed=1)


def check_follows_schema(tokenizer, compiler, out: list[int]) -> None:
    """Every output token is one the schema allows at its place; a finished reply is the schema's JSON."""
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    matcher = llguidance.LLMatcher(compiler.ll_tokenizer, compiler.grammar(schema_text(SCHEMA)), log_level=0)
    body = out[:-1] if out and out[-1] == eos else out
    assert matcher.validate_tokens(body) == len(body), tokenizer.decode(body)
    if out and out[-1] == eos:
        doc = json.loads(tokenizer.decode(body))
        assert set(doc) == {"ok", "tag"} and doc["tag"] in ("add", "snake", "fox")


@pytest.mark.parametrize("kind", ["perfect", "garbage", "edited", "another_document"])
def test_a_json_schema_holds_and_predictions_stay_lossless(model, tokenizer, compiler, kind):
    rng = random.Random(kind)
    ps = prompts(tokenizer, 3, seed=4)
    schema = SamplingParams(temperature=0.0, json_schema=schema_text(SCHEMA))
    free = run(make_engine(model, tokenizer, k_max=0), [request(p, 40, request_id=str(i)) for i, p in enumerate(ps)])
    plain_engine = make_engine(model, tokenizer, k_max=0)
    plain = run(plain_engine, [request(p, 40, sampling=schema, request_id=str(i)) for i, p in enumerate(ps)])
    for i in range(len(ps)):
        assert plain[str(i)] != free[str(i)]  # the random model does not write this JSON unless held to it
        check_follows_schema(tokenizer, compiler, plain[str(i)])
    other = tokenizer.encode('{"ok": false, "tag": "fox"}', add_special_tokens=False)
    preds = {
        "perfect": lambda out: out,
        "garbage": lambda out: [rng.randrange(VOCAB) for _ in out],
        "edited": lambda out: out[:3] + [rng.randrange(VOCAB)] + out[3:],
        "another_document": lambda out: other,
    }[kind]
    engine = make_engine(model, tokenizer)
    got = run(engine, [request(p, 40, prediction=preds(plain[str(i)]), sampling=schema, request_id=str(i))
                       for i, p in enumerate(ps)])
    assert got == plain
    if kind == "perfect":
        assert engine.forward_passes < plain_engine.forward_passes / 2


def test_a_json_schema_with_seeded_sampling_is_the_same_with_a_prediction(model, tokenizer, compiler):
    ps = prompts(tokenizer, 2, seed=8)
    sampling = SamplingParams(temperature=1.0, seed=5, json_schema=schema_text(SCHEMA))
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, 40, sampling=sampling, request_id=str(i)) for i, p in enumerate(ps)])
    for out in plain.values():
        check_follows_schema(tokenizer, compiler, out)
    got = run(make_engine(model, tokenizer), [request(p, 40, prediction=plain[str(i)], sampling=sampling, request_id=str(i))
                                             for i, p in enumerate(ps)])
    assert got == plain


def test_the_engine_refuses_a_schema_it_cannot_enforce(model, tokenizer):
    from foretell.config import ConfigError

    bad = SamplingParams(temperature=0.0, json_schema=schema_text({"type": "object", "properties": {"a": {"type": "strnig"}}}))
    with pytest.raises(ConfigError) as err:
        make_engine(model, tokenizer).validate(request(prompts(tokenizer, 1)[0], 8, sampling=bad))
    assert err.value.field == "response_format"


def test_warm_builds_the_tokenizer_view_once(tokenizer):
    compiler = GrammarCompiler(tokenizer, VOCAB)
    compiler.warm().join(timeout=60)
    view = compiler._ll_tokenizer
    assert view is not None and compiler.ll_tokenizer is view


def test_greedy_choices_are_the_masked_argmax_where_they_count(compiler, tokenizer):
    """The greedy shortcut (mask only the rows whose unmasked argmax the grammar refuses) against the full mask,
    on random logits: most raw argmaxes are refused; a few rows get an allowed token as their maximum."""
    import torch

    from foretell.core.sampling import SamplerState, argmax_rows, penalize

    doc = tokenizer.encode('{"ok": true, "tag": "fox"}', add_special_tokens=False)
    gen = torch.Generator().manual_seed(0)
    prefixes = []
    for trial in range(20):
        grammar = compiler.matcher(schema_text(SCHEMA))
        state = SamplerState(SamplingParams(temperature=0.0, json_schema=schema_text(SCHEMA)), [1], grammar=grammar)
        logits = torch.randn(len(doc) + 1, VOCAB, generator=gen)
        for j in range(len(doc)):  # the document's token is the maximum at most rows: long accepted prefixes
            if torch.rand(1, generator=gen) < 0.85:
                logits[j, doc[j]] = 10.0
        full = argmax_rows(penalize(logits, state, doc))
        fast = grammar.greedy_choices(logits, doc, argmax_rows(logits))
        m = next((j for j in range(len(doc)) if int(full[j]) != doc[j]), len(doc))
        assert fast[: m + 1].tolist() == full[: m + 1].tolist(), trial
        prefixes.append(m)
        assert (grammar.allowed([], 1, VOCAB)[0].numpy() == reference_mask(compiler, [])).all()  # rolled back
    assert max(prefixes) >= 5 and min(prefixes) < len(doc)  # long accepted prefixes, and refusals


def test_properties_come_in_the_order_the_schema_lists_them(compiler, tokenizer):
    """As OpenAI's structured outputs write them (the schema's text keeps its key order)."""
    schema = {"type": "object", "properties": {"zeta": {"type": "boolean"}, "alpha": {"type": "boolean"}},
              "required": ["zeta", "alpha"], "additionalProperties": False}
    for text, whole in (('{"zeta": true, "alpha": false}', True), ('{"alpha": false, "zeta": true}', False)):
        ids = tokenizer.encode(text, add_special_tokens=False)
        matcher = compiler.matcher(schema_text(schema)).matcher
        assert (matcher.validate_tokens(ids) == len(ids)) is whole, text
