"""Through HTTP, on the real engine (tiny model): one failing request fails alone and the server goes on."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from foretell.config import EngineConfig
from foretell.engine import llm_engine
from foretell.engine.async_engine import AsyncEngine
from foretell.server import build_app
from foretell.testing import make_tiny_model, make_tiny_tokenizer
from foretell.testing.server import serve_in_thread

BAD_SEED = 666
BODY = {"model": "tiny", "messages": [{"role": "user", "content": "def add(a, b):"}], "max_tokens": 40,
        "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def server():
    cfg = EngineConfig(measure_cost_curve=False, max_num_seqs=4, max_queue=1, kv_budget_tokens=4096)
    engine = AsyncEngine.from_model(make_tiny_model(seed=3), make_tiny_tokenizer(), cfg, "tiny")
    try:
        with serve_in_thread(build_app(engine)) as url:
            yield engine, url
    finally:
        engine.shutdown()


def stream_text(url: str, body: dict) -> tuple[str, list[dict]]:
    """Text of a chat stream and any error events in it."""
    text, errors = [], []
    with httpx.stream("POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                errors.append(event["error"])
            else:
                text += [c["delta"].get("content") or "" for c in event["choices"]]
    return "".join(text), errors


@pytest.mark.parametrize("extra", [{"repetition_penalty": 1e-300, "temperature": 1.0, "seed": 1},
                                   {"temperature": 1e-300, "seed": 1}, {"repetition_penalty": 1e-300}])
def test_extreme_but_valid_sampling_settings_answer_200(server, extra):
    r = httpx.post(server[1] + "/v1/chat/completions", json={**BODY, **extra}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] == "length"


def test_a_failing_request_gets_500_while_a_stream_beside_it_completes(server, monkeypatch):
    engine, url = server
    alone, errors = stream_text(url, BODY)
    assert not errors and alone
    real = llm_engine.verify_step
    started = threading.Event()

    def verify(logits, draft, sampler):
        started.set()
        if sampler.params.seed == BAD_SEED:
            raise RuntimeError("injected fault")
        return real(logits, draft, sampler)

    monkeypatch.setattr(llm_engine, "verify_step", verify)
    result = {}
    streamer = threading.Thread(target=lambda: result.update(stream=stream_text(url, BODY)))
    streamer.start()
    started.wait(10)
    bad = httpx.post(url + "/v1/chat/completions", json={**BODY, "seed": BAD_SEED}, timeout=60)
    streamer.join(60)
    assert bad.status_code == 500
    assert bad.json()["error"]["code"] == "internal_error" and bad.json()["error"]["type"] == "server_error"
    assert result["stream"] == (alone, [])
    assert httpx.get(url + "/health").status_code == 200
    assert engine.metrics()["kv_tokens_used"] >= 0 and engine.engine.pool.reserved_tokens == 0


def test_a_full_queue_answers_429_with_retry_after(server):
    url = server[1]
    body = {**BODY, "max_tokens": 64}
    codes, lock = [], threading.Lock()

    def one():
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
        with lock:
            codes.append((r.status_code, r.headers.get("retry-after")))

    threads = [threading.Thread(target=one) for _ in range(8)]  # 4 running + 1 queued: 3 are refused
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    refused = [c for c in codes if c[0] == 429]
    assert refused and all(ra is not None and int(ra) >= 1 for _, ra in refused)
    assert {c for c, _ in codes} <= {200, 429}
