"""The HTTP layer against a fake engine: error mapping, SSE format, usage, auth, metrics, fuzzing.

The fake implements AsyncEngine's API; it "generates" a fixed text whatever the prompt and marks tokens that
match the prediction as accepted, so everything here is about protocol, not about the model. The same
behaviours are checked on the real engine (tiny model) beside it: test_server_openai (official client,
streaming, usage, n, logprobs, auth, disconnects, 429, metrics), test_bad_input (error mapping),
test_security (auth on every endpoint), test_server_limits / test_server_inputs / test_server_faults.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foretell.config import ConfigError, EngineConfig
from foretell.engine.api import QueueFullError, RequestOutput, RequestStats, RequestTooLongError, TokenLogprob
from foretell.engine.detok import IncrementalDetokenizer, StopStringMatcher
from foretell.server import build_app
from foretell.testing import make_tiny_tokenizer

OUTPUT = "def add(a, b):\n    return a + b\n"


class FakeEngine:
    """AsyncEngine's API; outputs OUTPUT (then EOS) three tokens per step."""

    def __init__(self, max_model_len: int = 256, max_prediction_tokens: int = 64, queue_full: bool = False):
        self.tokenizer = make_tiny_tokenizer()
        self.model_name = "tiny-fake"
        self.max_model_len = max_model_len
        self.config = EngineConfig(max_prediction_tokens=max_prediction_tokens, kv_budget_tokens=4096)
        self.queue_full = queue_full
        self.seen: list = []
        self.aborted: list[str] = []
        self.output_ids = self.tokenizer.encode(OUTPUT, add_special_tokens=False) + [self.tokenizer.eos_token_id]

    def validate(self, req) -> None:
        n = len(req.prompt_ids)
        if n >= self.max_model_len:
            raise RequestTooLongError("messages", f"prompt is {n} tokens; the context length is {self.max_model_len}")
        if n + req.max_tokens > self.max_model_len:
            raise RequestTooLongError("max_tokens", "prompt + max_tokens exceeds the context length")
        pred = req.speculation.prediction
        if pred is not None and len(pred) > self.config.max_prediction_tokens:
            raise RequestTooLongError("prediction", f"prediction is {len(pred)} tokens; the limit is 64")
        if any(not 0 <= t < len(self.tokenizer) for t in req.prompt_ids):
            raise ConfigError("prompt", "token ids out of range")

    async def generate(self, req):
        self.validate(req)
        if self.queue_full:
            raise QueueFullError("full")
        self.seen.append(req)
        stats = RequestStats(prompt_tokens=len(req.prompt_ids))
        detok, stopper = IncrementalDetokenizer(self.tokenizer), StopStringMatcher(req.stop)
        pred = req.speculation.prediction or ()
        ids = self.output_ids[: req.max_tokens]
        pos, finished = 0, False
        try:
            while not finished:
                await asyncio.sleep(0.001)
                step, flags = [], []
                pieces = []
                for t in ids[pos : pos + 3]:
                    step.append(t)
                    flags.append(pos < len(pred) and pred[pos] == t)
                    pos += 1
                    pieces.append(detok.add(t))
                    hit_stop = stopper.add(pieces[-1]) or t == self.tokenizer.eos_token_id
                    if hit_stop or pos == len(ids):
                        finished = True
                        reason = "stop" if hit_stop else "length"
                        break
                stats.completion_tokens += len(step)
                stats.accepted_prediction_tokens += sum(flags)
                stats.forward_passes += 1
                if finished:
                    stats.rejected_prediction_tokens = max(0, min(len(pred), pos + 3) - stats.accepted_prediction_tokens)
                lps = None
                if req.sampling.logprobs is not None:
                    lps = [TokenLogprob(t, -0.25, [(t, -0.25), (5, float("-inf"))][: req.sampling.logprobs]) for t in step]
                yield RequestOutput(
                    req.request_id, step, stopper.take(final=finished), flags, lps,
                    finished, reason if finished else None, stats, token_texts=pieces,
                )
        finally:
            if not finished:
                self.aborted.append(req.request_id)

    def metrics(self) -> dict:
        return {"queue_depth": 0, "running": 0, "kv_tokens_used": 0, "kv_tokens_total": 4096}

    def shutdown(self) -> None:
        pass


@pytest.fixture
def engine():
    return FakeEngine()


@pytest.fixture
def client(engine):
    with TestClient(build_app(engine)) as c:
        yield c


def chat(client, headers=None, **body):
    body = {"model": "tiny-fake", "messages": [{"role": "user", "content": "hi"}], **body}
    return client.post("/v1/chat/completions", json=body, headers=headers)


def sse_events(text: str) -> list:
    lines = [ln[len("data: "):] for ln in text.split("\n\n") if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(ln) for ln in lines[:-1]]


# -- success paths ----------------------------------------------------------------------------------
def test_chat_non_streaming_usage_and_stats(client):
    r = chat(client, max_tokens=50, temperature=0, prediction={"type": "content", "content": "def add(a, b):\n"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": OUTPUT, "refusal": None}
    assert body["choices"][0]["finish_reason"] == "stop"
    u = body["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    d = u["completion_tokens_details"]
    assert d["reasoning_tokens"] == 0 and 0 < d["accepted_prediction_tokens"] <= u["completion_tokens"]
    assert "cached_tokens" in u["prompt_tokens_details"]
    assert body["foretell"]["forward_passes"] >= 1


def test_chat_streaming_format(client):
    r = chat(client, max_tokens=50, stream=True, stream_options={"include_usage": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert text == OUTPUT
    finals = [e for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and finals[0]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] > 0
    assert all(e["object"] == "chat.completion.chunk" and e["id"] == events[0]["id"] for e in events)


def test_stop_string_and_length(client):
    body = chat(client, max_tokens=50, stop=["return"]).json()
    assert body["choices"][0]["message"]["content"] == "def add(a, b):\n    "
    body = chat(client, max_tokens=2).json()
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 2


def test_n_choices_and_seed_offsets(client, engine):
    body = chat(client, max_tokens=50, n=3, seed=7, temperature=0.5, prediction={"type": "content", "content": OUTPUT}).json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert [r.sampling.seed for r in engine.seen] == [7, 8, 9]
    one = sum(len(engine.output_ids) for _ in range(3))
    assert body["usage"]["completion_tokens"] == one
    assert body["usage"]["prompt_tokens"] == len(engine.seen[0].prompt_ids)


def test_completions_prompt_lists_and_logprobs(client, engine):
    r = client.post("/v1/completions", json={"model": "default", "prompt": ["a", "b"], "n": 2, "max_tokens": 4, "logprobs": 1})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["choices"]) == 4 and body["object"] == "text_completion"
    lp = body["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 4
    assert lp["text_offset"][0] == 0
    r = client.post("/v1/completions", json={"model": "default", "prompt": [1, 2, 3], "max_tokens": 2})
    assert r.status_code == 200 and engine.seen[-1].prompt_ids == [1, 2, 3]


def test_chat_logprobs_shape_and_inf(client):
    body = chat(client, max_tokens=3, logprobs=True, top_logprobs=2).json()
    content = body["choices"][0]["logprobs"]["content"]
    assert len(content) == 3
    assert set(content[0]) == {"token", "logprob", "bytes", "top_logprobs"}
    assert content[0]["top_logprobs"][1]["logprob"] == -9999.0  # -inf is not JSON


def test_prediction_parts_extensions_and_header(client, engine):
    pred = {"type": "content", "content": [{"type": "text", "text": "def "}, {"type": "text", "text": "add"}]}
    r = chat(client, max_tokens=5, prediction=pred, top_k=5, min_p=0.1, repetition_penalty=1.1,
             headers={"x-ms-oai-ev3-predictor_search_length": "8"}, some_unknown_field={"x": 1})
    assert r.status_code == 200, r.text
    req = engine.seen[-1]
    assert req.speculation.prediction == tuple(engine.tokenizer.encode("def add", add_special_tokens=False))
    assert req.speculation.search_length == 8
    assert (req.sampling.top_k, req.sampling.min_p, req.sampling.repetition_penalty) == (5, 0.1, 1.1)
    chat(client, max_tokens=5, prediction=pred, prediction_search_length=2, headers={"x-ms-oai-ev3-predictor_search_length": "8"})
    assert engine.seen[-1].speculation.search_length == 2


def test_developer_role_and_text_parts(client, engine):
    msgs = [{"role": "developer", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert chat(client, messages=msgs, max_tokens=2).status_code == 200
    text = engine.tokenizer.decode(engine.seen[-1].prompt_ids)
    assert "<|im_start|>system\nbe brief" in text and text.endswith("<|im_start|>assistant\n")


def test_models_health_metrics(client):
    assert client.get("/health").json()["status"] == "ok"
    models = client.get("/v1/models").json()
    assert models["data"][0]["id"] == "tiny-fake"
    chat(client, max_tokens=4, prediction={"type": "content", "content": "def"})
    chat(client, temperature=5)
    text = client.get("/metrics").text
    assert 'foretell_requests_total{endpoint="/v1/chat/completions",status="200"} 1.0' in text
    assert 'foretell_requests_total{endpoint="/v1/chat/completions",status="400"} 1.0' in text
    for name in ("foretell_prompt_tokens_total", "foretell_prediction_tokens_accepted_total", "foretell_queue_depth",
                 "foretell_time_to_first_token_seconds_bucket", "foretell_request_latency_seconds_count"):
        assert name in text


def test_registries_are_per_app(engine):
    a, b = TestClient(build_app(engine)), TestClient(build_app(engine))
    chat(a, max_tokens=1)
    assert 'status="200"} 1.0' in a.get("/metrics").text
    assert 'status="200"} 1.0' not in b.get("/metrics").text


# -- errors ---------------------------------------------------------------------------------------
BAD = [
    ({"temperature": 3}, "temperature"),
    ({"temperature": "0.5"}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"n": 0}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_completion_tokens": -1}, "max_completion_tokens"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"stop": [""]}, "stop"),
    ({"stop": 5}, "stop"),
    ({"presence_penalty": 9}, "presence_penalty"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"seed": 2**70}, "seed"),
    ({"messages": []}, "messages"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "function", "content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user"}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages[0].content[0].type"),
    ({"prediction": {"type": "content"}}, "prediction.content"),
    ({"prediction": {"type": "other", "content": "x"}}, "prediction.type"),
    ({"prediction": {"type": "content", "content": [{"type": "image_url"}]}}, "prediction.content[0].type"),
    ({"prediction": {"type": "content", "content": "x " * 200}}, "prediction"),
    ({"prediction_search_length": 0}, "prediction_search_length"),
    ({"max_tokens": 10_000}, "max_tokens"),
    ({"max_completion_tokens": 10_000}, "max_completion_tokens"),
    ({"messages": [{"role": "user", "content": "word " * 300}]}, "messages"),
    ({"tools": [{"type": "function"}]}, "tools[0].function"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),  # the tiny template renders no tools
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": "an object"}}},
     "response_format.json_schema.schema"),
    ({"logit_bias": {"five": 10}}, "logit_bias"),
    ({"logit_bias": {"5": 101}}, "logit_bias"),
    ({"logit_bias": {"5": "10"}}, "logit_bias"),
    ({"logit_bias": {"-3": 1}}, "logit_bias"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"top_k": -2}, "top_k"),
    ({"repetition_penalty": 0}, "repetition_penalty"),
]


@pytest.mark.parametrize("patch,param", BAD)
def test_bad_chat_fields_are_400_naming_the_field(client, patch, param):
    r = chat(client, **patch)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"]


@pytest.mark.parametrize(
    "body,param",
    [
        ({"model": "default"}, "prompt"),
        ({"model": "default", "prompt": ""}, "prompt"),
        ({"model": "default", "prompt": [[1, 2], [99999]]}, "prompt"),
        ({"model": "default", "prompt": "x", "logprobs": 6}, "logprobs"),
        ({"model": "default", "prompt": "x", "max_tokens": 0}, "max_tokens"),  # 0 only with echo
        ({"model": "default", "prompt": "x", "max_tokens": 1000}, "max_tokens"),
        ({"prompt": "x"}, "model"),
    ],
)
def test_bad_completion_fields(client, body, param):
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_bad_search_length_header(client):
    r = chat(client, headers={"x-ms-oai-ev3-predictor_search_length": "lots"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "x-ms-oai-ev3-predictor_search_length"


def test_unknown_model_404(client):
    r = chat(client, model="gpt-4o")
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    assert r.json()["error"]["param"] == "model"


@pytest.mark.parametrize("raw", [b"{", b"[]", b"null", b"", b"\xff\xfe", b'{"model": "tiny-fake", "messages": [}'])
def test_malformed_json_400(client, raw):
    r = client.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "error" in r.json()


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_non_finite_numbers_400(client, value):
    raw = b'{"model": "tiny-fake", "messages": [{"role": "user", "content": "x"}], "temperature": ' + value + b"}"
    r = client.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"


def test_queue_full_429(engine):
    engine.queue_full = True
    with TestClient(build_app(engine)) as c:
        assert chat(c).status_code == 429
        r = chat(c, stream=True)
        assert r.status_code == 429 and r.json()["error"]["code"] == "queue_full"


def test_auth(engine):
    c = TestClient(build_app(engine, api_key="s3cret"))
    assert chat(c).status_code == 401
    assert chat(c, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert chat(c, headers={"Authorization": "Bearer s3cret"}, max_tokens=1).status_code == 200
    assert c.get("/v1/models").status_code == 401
    assert c.get("/health").status_code == 200


def test_unknown_route_and_method_are_openai_shaped(client):
    r = client.get("/v1/nope")
    assert r.status_code == 404 and r.json()["error"]["message"]
    r = client.get("/v1/chat/completions")
    assert r.status_code == 405 and "error" in r.json()


# -- fuzzing: bad input never gives a 5xx -----------------------------------------------------------
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_fields = st.sampled_from(
    ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "seed",
     "stop", "stream", "stream_options", "logprobs", "top_logprobs", "prediction", "prediction_search_length",
     "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "echo", "logit_bias"]
)
_good_msgs = st.just([{"role": "user", "content": "hi"}])
_pred = st.fixed_dictionaries({"type": st.just("content"), "content": st.text(max_size=30) | _json})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(["/v1/chat/completions", "/v1/completions"]),
    body=st.dictionaries(_fields, _json | _good_msgs | _pred | st.just("tiny-fake"), max_size=8),
    base=st.booleans(),
)
def test_fuzz_json_bodies_never_5xx(client, path, body, base):
    if base:
        body = {"model": "tiny-fake", "messages": [{"role": "user", "content": "x"}], "prompt": "x", "max_tokens": 3, **body}
    r = client.post(path, json=body)
    assert r.status_code < 500, (body, r.text)
    if r.status_code != 200:
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=64))
def test_fuzz_garbage_bytes_never_5xx(client, raw):
    r = client.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code < 500


def test_a_packaged_models_short_name_names_it():
    """`--model qwen2.5-coder-1.5b` serves "qwen2.5-coder-1.5b-instruct"; a client may name it either way,
    by its upstream repository id (what clients written for vLLM send), or "default", but not by another
    packaged model's name."""
    from types import SimpleNamespace

    from foretell.server.app import check_model
    from foretell.server.errors import APIError

    engine = SimpleNamespace(model_name="qwen2.5-coder-1.5b-instruct")
    for name in ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B", "default",
                 "Qwen/Qwen2.5-Coder-1.5B-Instruct", "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"):
        check_model(engine, name)
    for name in ("qwen2.5-coder-0.5b", "Qwen/Qwen2.5-Coder-0.5B-Instruct", "Qwen/Qwen2.5-Coder-7B-Instruct", "",
                 "gpt-4o"):
        with pytest.raises(APIError) as info:
            check_model(engine, name)
        assert info.value.status == 404


# -- CORS ------------------------------------------------------------------------------------------------
def test_no_cross_origin_access_unless_allowed(engine):
    headers = {"Origin": "https://example.com", "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization, content-type"}
    with TestClient(build_app(engine)) as c:
        preflight = c.options("/v1/chat/completions", headers=headers)
        assert "access-control-allow-origin" not in preflight.headers
        assert "access-control-allow-origin" not in chat(c, headers={"Origin": "https://example.com"}).headers
    with TestClient(build_app(engine, api_key="k", allowed_origins=["https://example.com"])) as c:
        preflight = c.options("/v1/chat/completions", headers=headers)  # answered before the key is asked
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://example.com"
        r = chat(c, headers={"Origin": "https://example.com", "Authorization": "Bearer k"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://example.com"
        other = c.options("/v1/chat/completions", headers={**headers, "Origin": "https://evil.example"})
        assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    with TestClient(build_app(engine, allowed_origins=["*"])) as c:
        assert chat(c, headers={"Origin": "https://any.example"}).headers["access-control-allow-origin"] == "*"


# -- echo ------------------------------------------------------------------------------------------------
def test_echo_puts_each_prompt_before_its_choices(client):
    body = {"model": "default", "prompt": ["def f(", "x = "], "n": 2, "max_tokens": 5, "echo": True}
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    texts = [c["text"] for c in sorted(r.json()["choices"], key=lambda c: c["index"])]
    plain = client.post("/v1/completions", json={**body, "echo": False}).json()["choices"]
    plain = [c["text"] for c in sorted(plain, key=lambda c: c["index"])]
    assert texts == ["def f(" + plain[0], "def f(" + plain[1], "x = " + plain[2], "x = " + plain[3]]
    r = client.post("/v1/completions", json={**body, "stream": True})
    streamed = {}
    for ev in sse_events(r.text):
        for c in ev["choices"]:
            streamed[c["index"]] = streamed.get(c["index"], "") + c["text"]
    assert [streamed[i] for i in range(4)] == texts


def test_echo_of_token_ids_decodes_them(client, engine):
    ids = engine.tokenizer.encode("def add(a, b):", add_special_tokens=False)
    r = client.post("/v1/completions", json={"model": "default", "prompt": ids, "max_tokens": 3, "echo": True})
    assert r.json()["choices"][0]["text"].startswith("def add(a, b):")


# -- /tokenize and /detokenize (vLLM's) ----------------------------------------------------------------
def test_tokenize_gives_the_ids_the_generation_endpoints_feed(client, engine):
    r = client.post("/tokenize", json={"model": "tiny-fake", "prompt": "def add(a, b):", "return_token_strs": True})
    assert r.status_code == 200, r.text
    body = r.json()
    completion = client.post("/v1/completions", json={"model": "tiny-fake", "prompt": "def add(a, b):", "max_tokens": 2})
    assert body["tokens"] == list(engine.seen[-1].prompt_ids) and body["count"] == len(body["tokens"])
    assert completion.json()["usage"]["prompt_tokens"] == body["count"]
    assert body["max_model_len"] == engine.max_model_len and len(body["token_strs"]) == body["count"]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    chat_ids = client.post("/tokenize", json={"messages": messages}).json()["tokens"]
    chat(client, messages=messages, max_tokens=2)
    assert chat_ids == list(engine.seen[-1].prompt_ids)
    without = client.post("/tokenize", json={"messages": messages, "add_generation_prompt": False}).json()["tokens"]
    assert chat_ids[: len(without)] == without and len(without) < len(chat_ids)
    text = client.post("/detokenize", json={"tokens": body["tokens"]}).json()["prompt"]
    assert text == "def add(a, b):"


@pytest.mark.parametrize("path,body,param", [
    ("/tokenize", {"prompt": "x", "messages": [{"role": "user", "content": "x"}]}, "messages"),
    ("/tokenize", {}, "prompt"),
    ("/tokenize", {"prompt": 3}, "prompt"),
    ("/tokenize", {"prompt": "x", "model": "gpt-9"}, "model"),
    ("/detokenize", {"tokens": [1, 10**9]}, "tokens[1]"),
    ("/detokenize", {"tokens": "abc"}, "tokens"),
])
def test_tokenize_and_detokenize_refuse_bad_input_naming_the_field(client, path, body, param):
    r = client.post(path, json=body)
    assert 400 <= r.status_code < 500 and r.json()["error"]["param"] == param, r.text


# -- how the chat template renders (vLLM's extensions) ----------------------------------------------------
def test_continue_final_message_prefills_the_reply(client, engine):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "```python\n"}]
    r = chat(client, messages=messages, continue_final_message=True, max_tokens=5)
    assert r.status_code == 200, r.text
    prompt = engine.tokenizer.decode(engine.seen[-1].prompt_ids)
    assert prompt.endswith("<|im_start|>assistant\n```python\n"), prompt  # the turn left open, no new one
    chat(client, messages=messages, max_tokens=5)
    assert engine.tokenizer.decode(engine.seen[-1].prompt_ids).endswith("```python\n<|im_end|>\n<|im_start|>assistant\n")
    chat(client, messages=messages[:1], add_generation_prompt=False, max_tokens=5)
    assert engine.tokenizer.decode(engine.seen[-1].prompt_ids).endswith("hi<|im_end|>\n")


def test_chat_template_kwargs_reach_the_template(engine):
    engine.tokenizer = copy.deepcopy(engine.tokenizer)
    engine.tokenizer.chat_template = "{% if terse %}TERSE {% endif %}" + engine.tokenizer.chat_template
    with TestClient(build_app(engine)) as client:
        chat(client, chat_template_kwargs={"terse": True}, max_tokens=2)
        assert engine.tokenizer.decode(engine.seen[-1].prompt_ids).startswith("TERSE ")
        chat(client, max_tokens=2)
        assert not engine.tokenizer.decode(engine.seen[-1].prompt_ids).startswith("TERSE ")
        tokens = client.post("/tokenize", json={"messages": [{"role": "user", "content": "hi"}],
                                                "chat_template_kwargs": {"terse": True}}).json()["tokens"]
        assert engine.tokenizer.decode(tokens).startswith("TERSE ")


@pytest.mark.parametrize("body", [
    {"continue_final_message": True},  # the last message is the user's
    {"continue_final_message": True, "add_generation_prompt": True,
     "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]},
    {"chat_template_kwargs": {"add_generation_prompt": False}},
    {"chat_template_kwargs": {"tools": []}},
    {"add_generation_prompt": "yes"},
])
def test_bad_template_options_get_a_400(client, body):
    r = chat(client, **body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] in ("continue_final_message", "chat_template_kwargs", "add_generation_prompt")


def test_every_answer_carries_a_request_id(client):
    ok, bad = chat(client, max_tokens=2), chat(client, temperature=9)
    ids = {ok.headers["x-request-id"], bad.headers["x-request-id"]}
    assert len(ids) == 2 and all(i.startswith("req_") for i in ids)
    assert chat(client, headers={"x-request-id": "trace-42"}, max_tokens=2).headers["x-request-id"] == "trace-42"
    assert client.get("/health", headers={"x-request-id": "x" * 500}).headers["x-request-id"].startswith("req_")
