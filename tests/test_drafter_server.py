"""The ``speculation`` extension for draft models over HTTP: methods, validation (400 naming the field),
the ``foretell`` stats block and /metrics, with two tiny fp32 models sharing a vocabulary."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from foretell.config import EngineConfig
from foretell.engine.async_engine import AsyncEngine
from foretell.engine.drafter import DraftModel
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import ModelRunner
from foretell.server import build_app
from foretell.testing import make_tiny_model, make_tiny_tokenizer
from test_drafter import noisy_copy

MSGS = [{"role": "user", "content": "def add(a, b):"}]


def _client(with_drafter: bool):
    target, tok = make_tiny_model(seed=1), make_tiny_tokenizer()
    config = EngineConfig(measure_cost_curve=False, draft_k=3)
    drafter = DraftModel(ModelRunner(noisy_copy(target, 0.5, seed=7)), ModelRunner(target).vocab_size, k=3) if with_drafter else None
    engine = AsyncEngine(LLMEngine(ModelRunner(target), tok, config, drafter=drafter), "tiny")
    return engine, TestClient(build_app(engine))


@pytest.fixture(scope="module")
def client():
    engine, client = _client(True)
    with client:
        yield client
    engine.shutdown()


def chat(client, **body):
    return client.post("/v1/chat/completions", json={"model": "tiny", "messages": MSGS, "max_tokens": 24,
                                                      "temperature": 0, **body})


def test_draft_method_is_lossless_and_reports_its_source(client):
    plain = chat(client, speculation={"method": "none"}).json()
    drafted = chat(client, speculation={"method": "draft", "k_max": 2}).json()
    assert drafted["choices"][0]["message"] == plain["choices"][0]["message"]
    stats = drafted["foretell"]
    assert stats["sources"]["draft"]["proposed"] > 0
    assert 0 <= stats["sources"]["draft"]["accepted"] <= stats["sources"]["draft"]["proposed"]
    assert stats["cascade_drafter_tokens"] == 0
    assert "draft" not in plain["foretell"]["sources"]


def test_cascade_reports_drafter_tokens_and_metrics(client):
    body = chat(client, speculation={"method": "cascade", "rule": "chow", "alpha": 1.0}).json()
    stats = body["foretell"]
    assert stats["cascade_drafter_tokens"] == body["usage"]["completion_tokens"] > 0
    metrics = client.get("/metrics").text
    assert 'foretell_draft_tokens_proposed_total{source="draft"}' in metrics
    assert 'foretell_draft_tokens_accepted_total{source="draft"}' in metrics
    line = next(x for x in metrics.splitlines() if x.startswith("foretell_cascade_drafter_tokens_total"))
    assert float(line.split()[-1]) >= stats["cascade_drafter_tokens"]


@pytest.mark.parametrize("spec, param", [
    ({"method": "magic"}, "speculation.method"),
    ({"method": "cascade", "rule": "v9"}, "speculation.rule"),
    ({"method": "cascade", "alpha": 2}, "speculation.alpha"),
    ({"method": "draft", "rule": "v3"}, "speculation.rule"),
    ({"method": "ngram", "alpha": 0.5}, "speculation.alpha"),
    ({"k_max": -1}, "speculation.k_max"),
])
def test_bad_speculation_is_a_400_naming_the_field(client, spec, param):
    r = chat(client, speculation=spec)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_draft_method_without_a_draft_model_is_a_400():
    engine, client = _client(False)
    with client:
        r = chat(client, speculation={"method": "cascade"})
    engine.shutdown()
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "speculation.method" and "--draft-model" in r.json()["error"]["message"]
