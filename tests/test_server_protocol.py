"""Pure parts of the server: request translation, error mapping, token texts for logprobs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from foretell.config import ConfigError
from foretell.engine.api import QueueFullError, RequestTooLongError
from foretell.server import protocol as P
from foretell.engine.detok import TokenTexts, split_by_tokens
from foretell.server.errors import APIError, from_engine_error, from_validation_error, loc_to_param
from foretell.testing import make_tiny_tokenizer


def chat_req(**kw) -> P.ChatCompletionRequest:
    return P.ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}], **kw})


def test_loc_to_param_drops_union_tags():
    names = P.FIELD_NAMES
    assert loc_to_param(("messages", 0, "content", "list[ContentPart]", 1, "type"), names) == "messages[0].content[1].type"
    assert loc_to_param(("stop", "str"), names) == "stop"
    assert loc_to_param((), names) is None


def test_validation_error_names_first_field():
    with pytest.raises(ValidationError) as info:
        P.ChatCompletionRequest.model_validate_json(b'{"model": "m", "messages": [], "temperature": 9}')
    err = from_validation_error(info.value, P.FIELD_NAMES)
    assert err.status == 400 and err.param in ("messages", "temperature")
    with pytest.raises(ValidationError) as info:
        P.ChatCompletionRequest.model_validate_json(b"{nope")
    assert from_validation_error(info.value, P.FIELD_NAMES).code == "invalid_json"


def test_engine_errors_map_to_statuses():
    assert from_engine_error(QueueFullError("x")).status == 429
    e = from_engine_error(RequestTooLongError("prompt", "too long"), {"prompt": "messages"})
    assert (e.status, e.param, e.code) == (400, "messages", "context_length_exceeded")
    e = from_engine_error(RequestTooLongError("prediction", "too long"))
    assert (e.param, e.code) == ("prediction", "prediction_too_long")
    assert from_engine_error(ConfigError("top_p", "bad")).param == "top_p"
    assert from_engine_error(RuntimeError("bug")).status == 500


def test_sampling_translation():
    s = P.sampling_params(chat_req(top_p=0.0, temperature=0.7, top_k=-1, seed=5), logprobs=None, seed_offset=2)
    assert (s.temperature, s.top_p, s.top_k, s.seed) == (0.0, 1.0, 0, 7)
    s = P.sampling_params(chat_req(), logprobs=3, seed_offset=0)
    assert (s.temperature, s.seed, s.logprobs, s.repetition_penalty) == (1.0, None, 3, 1.0)


def test_prediction_and_search_length():
    tok = make_tiny_tokenizer()
    req = chat_req(prediction={"type": "content", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
    assert P.prediction_ids(tok, req.prediction) == tuple(tok.encode("ab", add_special_tokens=False))
    assert P.prediction_ids(tok, chat_req(prediction={"type": "content", "content": ""}).prediction) is None
    assert P.search_length(chat_req(), "16") == 16
    assert P.search_length(chat_req(prediction_search_length=4), "16") == 4
    assert P.search_length(chat_req(), None) is None
    with pytest.raises(APIError) as info:
        P.search_length(chat_req(), "0")
    assert info.value.param == P.SEARCH_LENGTH_HEADER


def test_plan_expands_prompts_times_n():
    req = P.CompletionRequest.model_validate({"model": "m", "prompt": ["a", "b"], "n": 2, "seed": 1, "stop": "x"})
    plan = P.plan_requests(req, [[1], [2, 3]], None, lambda n: 10 - n, None, P.SpeculationParams())
    assert plan.prompt_index == [0, 0, 1, 1] and plan.prompt_lens == [1, 2]
    assert [r.max_tokens for r in plan.requests] == [9, 9, 8, 8]
    assert [r.sampling.seed for r in plan.requests] == [1, 2, 1, 2]
    assert plan.requests[0].stop == ("x",)


def test_token_texts_bytes_of_split_characters():
    tok = make_tiny_tokenizer()
    texts = TokenTexts(tok)
    ids = tok.encode("你好 ✓", add_special_tokens=False)
    raw = b"".join(bytes(texts.get(i)[1]) for i in ids)
    assert raw == "你好 ✓".encode()
    assert texts.text(tok.eos_token_id) == "<|im_end|>"


def test_split_by_tokens():
    assert split_by_tokens("abcdef", ["ab", "c", "def"]) == ["ab", "c", "def"]
    assert split_by_tokens("abc", ["ab", "cd", "e"]) == ["ab", "c", ""]
    assert split_by_tokens("abcx", ["ab", "c"]) == ["ab", "cx"]
