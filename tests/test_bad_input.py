"""Bad input, as a new user or a hostile client sends it, against the real engine (tiny model): every request
gets a 4xx in OpenAI's error shape naming the field, and a stream running beside them is not disturbed."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from foretell.config import EngineConfig
from foretell.engine.async_engine import AsyncEngine
from foretell.server import build_app
from foretell.testing import make_tiny_model, make_tiny_tokenizer
from foretell.testing.server import serve_in_thread

MSG = [{"role": "user", "content": "def add(a, b):"}]
CHAT = {"model": "tiny", "messages": MSG, "max_tokens": 4}
COMP = {"model": "tiny", "prompt": "def add", "max_tokens": 4}
LIMIT = 256 * 1024

# (path, body or raw bytes, expected status, expected param)
CASES = [
    # wrong types
    ("chat", {**CHAT, "temperature": "0.5"}, 400, "temperature"),
    ("chat", {**CHAT, "max_tokens": 4.5}, 400, "max_tokens"),
    ("chat", {**CHAT, "n": True}, 400, "n"),
    ("chat", {**CHAT, "messages": "hello"}, 400, "messages"),
    ("chat", {**CHAT, "messages": [{"role": "user", "content": 7}]}, 400, "messages[0].content"),
    ("chat", {**CHAT, "stream": "yes"}, 400, "stream"),
    ("chat", {**CHAT, "seed": 2**70}, 400, "seed"),
    ("comp", {**COMP, "prompt": [1.5]}, 400, "prompt"),
    ("comp", {**COMP, "logprobs": True}, 400, "logprobs"),
    # missing fields
    ("chat", {"messages": MSG}, 400, "model"),
    ("chat", {"model": "tiny"}, 400, "messages"),
    ("comp", {"model": "tiny"}, 400, "prompt"),
    ("chat", {**CHAT, "messages": [{"content": "hi"}]}, 400, "messages[0].role"),
    # empty things
    ("chat", {**CHAT, "messages": []}, 400, "messages"),
    ("chat", {**CHAT, "messages": [{"role": "user", "content": None}]}, 400, "messages[0].content"),
    ("comp", {**COMP, "prompt": ""}, 400, "prompt"),
    ("comp", {**COMP, "prompt": []}, 400, "prompt"),
    # unknown roles and parts
    ("chat", {**CHAT, "messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages[0].role"),
    ("chat", {**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
     "messages[0].content[0].type"),
    # lone surrogates (valid JSON escapes, not valid Unicode text)
    ("chat", b'{"model": "tiny", "messages": [{"role": "user", "content": "a\\ud800b"}]}', 400, None),
    ("chat", {**CHAT, "prediction": {"type": "content", "content": "\ud83d"}}, 400, None),
    ("comp", b'{"model": "tiny", "prompt": "\\udfff"}', 400, None),
    # predictions: huge, wrong-typed
    ("chat", {**CHAT, "prediction": {"type": "content", "content": "tok " * 5000}}, 400, "prediction"),
    ("chat", {**CHAT, "prediction": "def add"}, 400, "prediction"),
    ("chat", {**CHAT, "prediction": {"type": "text", "content": "x"}}, 400, "prediction.type"),
    ("chat", {**CHAT, "prediction": {"type": "content", "content": [{"type": "text"}]}}, 400,
     "prediction.content[0].text"),
    ("chat", {**CHAT, "prediction": {"type": "content", "content": 12}}, 400, "prediction.content"),
    ("chat", {**CHAT, "prediction_search_length": 0}, 400, "prediction_search_length"),
    # absurd limits
    ("chat", {**CHAT, "max_tokens": 10**12}, 400, "max_tokens"),
    ("chat", {**CHAT, "max_tokens": 0}, 400, "max_tokens"),
    ("chat", {**CHAT, "max_completion_tokens": -1}, 400, "max_completion_tokens"),
    ("chat", {**CHAT, "n": 10**6}, 400, "n"),
    ("chat", {**CHAT, "n": 100}, 400, "n"),
    ("comp", {**COMP, "prompt": ["a"] * 50, "n": 3}, 400, "n"),
    ("chat", {**CHAT, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    ("chat", {**CHAT, "stop": ["x" * 10] * 100}, 400, "stop"),
    ("chat", {**CHAT, "stop": [""]}, 400, "stop"),
    ("chat", {**CHAT, "top_logprobs": 50, "logprobs": True}, 400, "top_logprobs"),
    ("chat", {**CHAT, "repetition_penalty": 0}, 400, "repetition_penalty"),
    ("chat", {**CHAT, "temperature": 1e308 * 10}, 400, None),  # JSON Infinity
    # oversize body, unknown model, over-context prompts
    ("chat", b'{"model": "tiny", "messages": [{"role": "user", "content": "' + b"a" * LIMIT + b'"}]}', 413, None),
    ("chat", {**CHAT, "model": "gpt-4o"}, 404, "model"),
    ("comp", {**COMP, "prompt": "word " * 400}, 400, "prompt"),
    ("chat", {**CHAT, "messages": [{"role": "user", "content": "word " * 400}]}, 400, "messages"),
    ("comp", {**COMP, "prompt": [[5] * 10, [10**9]]}, 400, "prompt"),
    # malformed JSON
    ("chat", b'{"model": "tiny", "messages": [', 400, None),
    ("chat", b"[1, 2, 3]", 400, None),
    ("chat", b"\xff\xfe\x00garbage", 400, None),
]


@pytest.fixture(scope="module")
def server():
    cfg = EngineConfig(measure_cost_curve=False, max_model_len=256, max_prediction_tokens=512, kv_budget_tokens=4096,
                       max_num_seqs=4, max_queue=4)
    engine = AsyncEngine.from_model(make_tiny_model(seed=8), make_tiny_tokenizer(), cfg, "tiny")
    try:
        with serve_in_thread(build_app(engine, max_body_bytes=LIMIT)) as url:
            yield engine, url
    finally:
        engine.shutdown()


def send(url: str, path: str, body) -> httpx.Response:
    path = {"chat": "/v1/chat/completions", "comp": "/v1/completions"}[path]
    if isinstance(body, bytes):
        return httpx.post(url + path, content=body, headers={"Content-Type": "application/json"}, timeout=60)
    raw = json.dumps(body, allow_nan=True, ensure_ascii=True)
    return httpx.post(url + path, content=raw.encode(), headers={"Content-Type": "application/json"}, timeout=60)


def stream_tokens(url: str) -> list[str]:
    body = {**CHAT, "max_tokens": 120, "ignore_eos": True, "temperature": 0, "stream": True}
    pieces = []
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: {"):
                event = json.loads(line[6:])
                assert "error" not in event, event
                pieces += [c["delta"].get("content", "") for c in event["choices"]]
    return pieces


def test_bad_input_matrix_is_4xx_naming_the_field_while_a_stream_goes_on(server):
    engine, url = server
    alone = "".join(stream_tokens(url))
    result = {}
    streamer = threading.Thread(target=lambda: result.update(text="".join(stream_tokens(url))))
    streamer.start()
    problems = []
    for path, body, status, param in CASES:
        r = send(url, path, body)
        try:
            err = r.json()["error"]
            ok = r.status_code == status and set(err) == {"message", "type", "param", "code"} and err["message"]
            if param is not None:
                ok = ok and err["param"] == param
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            problems.append((path, str(body)[:80], status, param, r.status_code, r.text[:200]))
    streamer.join(120)
    assert not problems, "\n".join(map(str, problems))
    assert result.get("text") == alone  # the stream beside them finished, unchanged
    assert httpx.get(url + "/health").status_code == 200
    assert engine.engine.pool.reserved_tokens == 0
