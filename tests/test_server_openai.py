"""The official ``openai`` client against the server (uvicorn in a thread on a free loopback port) running
the real engine on the tiny random model: fp32, greedy unless a test says otherwise."""

from __future__ import annotations

import re
import time

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foretell.config import EngineConfig
from foretell.engine.async_engine import AsyncEngine
from foretell.server import build_app
from foretell.testing import make_tiny_model, make_tiny_tokenizer
from foretell.testing.server import serve_in_thread

MSGS = [{"role": "user", "content": "def add(a, b):"}]


def make_engine(**config) -> AsyncEngine:
    cfg = EngineConfig(measure_cost_curve=False, max_prediction_tokens=256, **config)
    return AsyncEngine.from_model(make_tiny_model(), make_tiny_tokenizer(), cfg, "tiny")


@pytest.fixture(scope="module")
def server():
    engine = make_engine()
    try:
        with serve_in_thread(build_app(engine)) as url:
            yield engine, url
    finally:
        engine.shutdown()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server[1] + "/v1", api_key="unused", max_retries=0, timeout=60)


def chat(client, **kw):
    kw.setdefault("messages", MSGS)
    kw.setdefault("max_tokens", 24)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(model="tiny", **kw)


def check_usage(usage, returned_tokens: int) -> None:
    assert usage.completion_tokens == returned_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    d = usage.completion_tokens_details
    assert 0 <= d.accepted_prediction_tokens <= usage.completion_tokens
    assert d.rejected_prediction_tokens >= 0 and d.reasoning_tokens == 0
    assert usage.prompt_tokens_details.cached_tokens >= 0


# -- chat -----------------------------------------------------------------------------------------
def test_chat_prediction_string_and_parts_is_lossless(client):
    plain = chat(client, logprobs=True)
    text = plain.choices[0].message.content
    check_usage(plain.usage, len(plain.choices[0].logprobs.content))
    assert plain.usage.completion_tokens_details.accepted_prediction_tokens == 0
    as_string = chat(client, prediction={"type": "content", "content": text}, logprobs=True)
    half = len(text) // 2
    parts = [{"type": "text", "text": text[:half]}, {"type": "text", "text": text[half:]}]
    as_parts = chat(client, prediction={"type": "content", "content": parts})
    for r in (as_string, as_parts):
        assert r.choices[0].message.content == text
        assert r.choices[0].finish_reason == plain.choices[0].finish_reason
    check_usage(as_string.usage, len(as_string.choices[0].logprobs.content))
    assert as_string.usage.completion_tokens == plain.usage.completion_tokens
    assert as_string.usage.completion_tokens_details.accepted_prediction_tokens > 0
    assert as_string.model_extra["foretell"]["forward_passes"] < plain.model_extra["foretell"]["forward_passes"]


def test_chat_streaming_matches_non_streaming(client):
    plain = chat(client)
    text = plain.choices[0].message.content
    for prediction in (None, {"type": "content", "content": text}):
        extra = {"prediction": prediction} if prediction else {}
        chunks = list(chat(client, stream=True, stream_options={"include_usage": True}, logprobs=True, **extra))
        assert chunks[0].choices[0].delta.role == "assistant"
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == text
        n_logprobs = sum(len(c.choices[0].logprobs.content) for c in chunks if c.choices and c.choices[0].logprobs)
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        check_usage(chunks[-1].usage, n_logprobs)
        assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
            plain.choices[0].finish_reason
        ]


def test_speculation_methods_same_text_different_sources(client):
    """The ``speculation`` extension picks the draft sources per request; the text never changes."""
    plain = chat(client, max_tokens=40)
    text = plain.choices[0].message.content
    prediction = {"type": "content", "content": text}
    runs = {m: chat(client, max_tokens=40, prediction=prediction, extra_body={"speculation": {"method": m}})
            for m in ("none", "ngram", "prediction", "auto")}
    for r in runs.values():
        assert r.choices[0].message.content == text
    stats = {m: r.model_extra["foretell"] for m, r in runs.items()}
    completion = plain.usage.completion_tokens
    assert stats["none"]["sources"] == {} and stats["none"]["draft_tokens_proposed"] == 0
    assert stats["none"]["forward_passes"] - stats["none"]["prefill_passes"] == completion  # one token a pass
    assert runs["none"].usage.completion_tokens_details.accepted_prediction_tokens == 0
    assert set(stats["ngram"]["sources"]) <= {"ngram"}
    assert runs["ngram"].usage.completion_tokens_details.accepted_prediction_tokens == 0
    assert set(stats["prediction"]["sources"]) == {"prediction"}
    assert stats["prediction"]["sources"]["prediction"]["accepted"] == stats["prediction"]["draft_tokens_accepted"] > 0
    assert stats["prediction"]["forward_passes"] < stats["none"]["forward_passes"]
    assert runs["prediction"].usage.completion_tokens_details.accepted_prediction_tokens > 0
    capped = chat(client, max_tokens=40, prediction=prediction, extra_body={"speculation": {"k_max": 0}})
    assert capped.choices[0].message.content == text
    assert capped.model_extra["foretell"]["forward_passes"] == stats["none"]["forward_passes"]


@pytest.mark.parametrize("speculation, param", [({"method": "magic"}, "speculation.method"),
                                                ({"k_max": -1}, "speculation.k_max"),
                                                ({"k_max": "8"}, "speculation.k_max"),
                                                ("auto", "speculation")])
def test_speculation_bad_values_400(client, speculation, param):
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, extra_body={"speculation": speculation})
    assert info.value.status_code == 400 and info.value.param == param


def test_n_choices_with_prediction_sum_usage(client):
    plain = chat(client)
    text = plain.choices[0].message.content
    r = chat(client, n=3, prediction={"type": "content", "content": text})
    assert [c.message.content for c in r.choices] == [text] * 3
    assert r.usage.prompt_tokens == plain.usage.prompt_tokens
    assert r.usage.completion_tokens == 3 * plain.usage.completion_tokens
    assert r.usage.completion_tokens_details.accepted_prediction_tokens > 0


def test_sampling_seed_penalties_and_logprobs_lossless(client):
    kw = dict(temperature=1.0, seed=123, presence_penalty=0.5, frequency_penalty=0.3, n=2, logprobs=True, top_logprobs=3)
    a = chat(client, **kw)
    for choice in a.choices:
        pred = {"type": "content", "content": choice.message.content}
        b = chat(client, prediction=pred, **kw)
        assert b.choices[choice.index].message.content == choice.message.content
        la, lb = choice.logprobs.content, b.choices[choice.index].logprobs.content
        assert [t.token for t in la] == [t.token for t in lb]
        assert all(abs(x.logprob - y.logprob) < 1e-3 for x, y in zip(la, lb))
        assert all(len(t.top_logprobs) == 3 for t in lb)


def test_logit_bias_bans_a_token_and_stays_lossless_with_prediction(client):
    free = chat(client, logprobs=True)
    first = free.choices[0].logprobs.content[0].token
    banned = {str(t): -100 for t in make_tiny_tokenizer().encode(first, add_special_tokens=False)}
    a = chat(client, logit_bias=banned, logprobs=True)
    assert a.choices[0].logprobs.content[0].token != first
    text = a.choices[0].message.content
    b = chat(client, logit_bias=banned, prediction={"type": "content", "content": text})
    assert b.choices[0].message.content == text
    assert b.usage.completion_tokens_details.accepted_prediction_tokens > 0


@pytest.mark.parametrize("bias", [{"999999": 1}, {"1": 200}, {"x": 1}])
def test_logit_bias_bad_values_400(client, bias):
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, logit_bias=bias)
    assert info.value.status_code == 400 and info.value.param == "logit_bias"


def test_max_completion_tokens_with_prediction(client):
    r = chat(client, max_tokens=None, max_completion_tokens=5, prediction={"type": "content", "content": "x y z"})
    assert r.usage.completion_tokens <= 5


# -- completions ----------------------------------------------------------------------------------
def test_completions_with_prediction(client):
    kw = dict(model="tiny", prompt="def add(a, b):", max_tokens=24, temperature=0)
    plain = client.completions.create(**kw)
    text = plain.choices[0].text
    pred = client.completions.create(**kw, extra_body={"prediction": {"type": "content", "content": text}})
    assert pred.choices[0].text == text
    assert pred.usage.completion_tokens_details.accepted_prediction_tokens > 0
    stream = client.completions.create(
        **kw, stream=True, stream_options={"include_usage": True},
        extra_body={"prediction": {"type": "content", "content": text}},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == text
    check_usage(chunks[-1].usage, plain.usage.completion_tokens)


def test_echo_with_logprobs_scores_the_prompt_as_the_model_does(client):
    """``echo`` + ``logprobs`` (what evaluation harnesses send, with ``max_tokens: 0``): each prompt token's logprob
    after the tokens before it, against the tiny model's own forward pass (transformers, fp32)."""
    import torch

    prompt = "def add(a, b):\n    return a + b\n"
    scored = client.completions.create(model="tiny", prompt=prompt, max_tokens=0, echo=True, logprobs=2)
    (choice,) = scored.choices
    lp = choice.logprobs
    assert choice.text == prompt and choice.finish_reason == "length" and scored.usage.completion_tokens == 0
    ids = make_tiny_tokenizer().encode(prompt)
    with torch.no_grad():
        rows = make_tiny_model()(torch.tensor([ids])).logits[0].float().log_softmax(-1)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None and len(lp.tokens) == len(ids)
    want = [rows[i, ids[i + 1]].item() for i in range(len(ids) - 1)]
    assert lp.token_logprobs[1:] == pytest.approx(want, abs=1e-4)
    assert all(len(top) == 2 for top in lp.top_logprobs[1:])
    assert "".join(lp.tokens) == prompt and lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    # with a completion: the prompt's items, then the completion's, which are those without echo
    kw = dict(model="tiny", prompt=prompt, max_tokens=6, temperature=0, logprobs=2)
    both, alone = client.completions.create(**kw, echo=True), client.completions.create(**kw)
    assert both.choices[0].text == prompt + alone.choices[0].text
    blp, alp = both.choices[0].logprobs, alone.choices[0].logprobs
    assert blp.token_logprobs[: len(ids)] == lp.token_logprobs
    assert blp.token_logprobs[len(ids):] == pytest.approx(alp.token_logprobs, abs=1e-4)  # the prefix cache's rounding
    assert blp.text_offset[len(ids)] == len(prompt)
    # two prompts: each choice's offsets run on from its own prompt
    two = client.completions.create(model="tiny", prompt=["x = 1", prompt], max_tokens=3, temperature=0, echo=True,
                                    logprobs=0)
    assert [c.logprobs.text_offset[len(c.logprobs.tokens) - 3] for c in two.choices] == [len("x = 1"), len(prompt)]
    # streamed: the first chunk carries the prompt and its logprobs
    chunks = list(client.completions.create(**kw, echo=True, stream=True))
    assert chunks[0].choices[0].text == prompt and chunks[0].choices[0].logprobs.token_logprobs == lp.token_logprobs
    assert "".join(c.choices[0].text for c in chunks) == both.choices[0].text
    streamed_only = list(client.completions.create(model="tiny", prompt=prompt, max_tokens=0, echo=True, logprobs=2,
                                                   stream=True, stream_options={"include_usage": True}))
    assert streamed_only[0].choices[0].text == prompt and streamed_only[0].choices[0].finish_reason == "length"
    assert streamed_only[-1].usage.completion_tokens == 0


def test_models(client):
    assert [m.id for m in client.models.list().data] == ["tiny"]


# -- errors through the client --------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw,param",
    [
        (dict(temperature=2.5), "temperature"),
        (dict(max_tokens=100_000), "max_tokens"),
        (dict(messages=[{"role": "user", "content": "word " * 2100}]), "messages"),
        (dict(prediction={"type": "content", "content": "word " * 300}), "prediction"),
        (dict(stop=["a", "b", "c", "d", "e"]), "stop"),
        (dict(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]), "messages[0].content[0].type"),
    ],
)
def test_errors_400_with_param(client, kw, param):
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, **kw)
    assert info.value.status_code == 400 and info.value.param == param


def test_unknown_model_404(client):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=MSGS, max_tokens=2)
    assert info.value.code == "model_not_found"


def test_auth_401(server):
    engine, _ = server
    with serve_in_thread(build_app(engine, api_key="k")) as url:
        bad = openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        good = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        assert good.models.list().data[0].id == "tiny"


def _wait_idle(engine, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while engine.metrics()["running"] or engine.metrics()["queue_depth"]:
        assert time.monotonic() < deadline, engine.metrics()
        time.sleep(0.05)


def test_disconnect_aborts_and_frees_kv(server):
    engine, url = server
    _wait_idle(engine)
    used_before = engine.metrics()["kv_tokens_used"]
    body = {"model": "tiny", "messages": MSGS, "max_tokens": 1900, "temperature": 0, "stream": True, "ignore_eos": True}
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", url + "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            for _ in range(3):
                next(lines)
            assert engine.metrics()["running"] == 1
    _wait_idle(engine)
    # the aborted request's KV is released (nothing of it is kept in the prefix cache)
    assert engine.metrics()["kv_tokens_used"] <= used_before + 64


def _counter(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics").text
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


def test_non_streaming_client_timeout_aborts(server):
    engine, url = server
    _wait_idle(engine)
    before = _counter(url, "foretell_completion_tokens_total")
    body = {"model": "tiny", "messages": MSGS, "max_tokens": 1900, "temperature": 0, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url + "/v1/chat/completions", json=body, timeout=1.0)
    _wait_idle(engine)
    # the request was recorded when the disconnect was noticed, well before its 1900 tokens
    deadline = time.monotonic() + 10
    while _counter(url, "foretell_completion_tokens_total") == before:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _counter(url, "foretell_completion_tokens_total") - before < 1900


def test_queue_full_429():
    engine = make_engine(max_num_seqs=1, max_queue=0)
    try:
        with serve_in_thread(build_app(engine)) as url, httpx.Client(timeout=30) as http:
            body = {"model": "tiny", "messages": MSGS, "max_tokens": 1900, "temperature": 0, "stream": True, "ignore_eos": True}
            with http.stream("POST", url + "/v1/chat/completions", json=body) as r:
                lines = r.iter_lines()  # keep the iterator: dropping it closes the connection
                next(lines)
                second = http.post(url + "/v1/chat/completions", json={**body, "stream": False, "max_tokens": 2})
                assert second.status_code == 429 and second.json()["error"]["code"] == "queue_full"
            client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
            _wait_idle(engine)
            assert client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=2).choices
    finally:
        engine.shutdown()


def test_metrics_after_requests(server, client):
    _, url = server
    chat(client, prediction={"type": "content", "content": "anything"})
    text = httpx.get(url + "/metrics").text
    assert 'foretell_requests_total{endpoint="/v1/chat/completions",status="200"}' in text
    assert "foretell_forward_passes_total" in text and "foretell_kv_tokens_total" in text


# -- fuzzing the real engine behind the server: bad input never gives a 5xx ------------------------
_values = st.none() | st.booleans() | st.integers(-3, 200) | st.floats(-3, 3) | st.text(max_size=6) | st.lists(
    st.integers(-5, 500) | st.text(max_size=4), max_size=4
)
_fuzzed = st.fixed_dictionaries(
    {},
    optional={
        "temperature": _values, "top_p": _values, "n": st.integers(-1, 4) | _values, "seed": _values, "stop": _values,
        "stream": st.booleans(), "logprobs": _values, "top_logprobs": _values, "presence_penalty": _values,
        "frequency_penalty": _values, "top_k": _values, "min_p": _values, "repetition_penalty": _values,
        "prediction": st.fixed_dictionaries({"type": st.just("content"), "content": _values}),
        "prediction_search_length": _values, "prompt": _values, "messages": _values, "model": _values,
    },
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_fuzzed, path=st.sampled_from(["/v1/chat/completions", "/v1/completions"]))
def test_fuzz_real_engine_never_5xx(server, body, path):
    _, url = server
    base = {"model": "tiny", "messages": MSGS, "prompt": "x", "temperature": 0}
    body = {**base, **body, "max_tokens": 3}
    r = httpx.post(url + path, json=body, timeout=60)
    assert r.status_code < 500, (body, r.text)
