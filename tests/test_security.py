"""Security defaults: the API key guards every endpoint but /health (compared in constant time), no code
shipped with a model is run, and logs never hold prompt text (real engine, tiny model)."""

from __future__ import annotations

import json
import logging

import pytest
from fastapi.testclient import TestClient

from foretell.config import EngineConfig
from foretell.engine import llm_engine
from foretell.engine.async_engine import AsyncEngine
from foretell.models import ModelError
from foretell.models.loader import load_model
from foretell.server import app as app_module
from foretell.server import build_app
from foretell.testing import make_tiny_model, make_tiny_tokenizer, save_tiny_model_dir

SECRET = "zebra-violet-4471"
GUARDED = [("POST", "/v1/chat/completions"), ("POST", "/v1/completions"), ("GET", "/v1/models"),
           ("GET", "/v1/models/tiny"), ("GET", "/metrics")]


@pytest.fixture(scope="module")
def engine():
    cfg = EngineConfig(measure_cost_curve=False, kv_budget_tokens=4096)
    e = AsyncEngine.from_model(make_tiny_model(seed=4), make_tiny_tokenizer(), cfg, "tiny")
    yield e
    e.shutdown()


def test_the_api_key_guards_every_endpoint_but_health(engine, monkeypatch):
    compared = []
    real = app_module.hmac.compare_digest
    monkeypatch.setattr(app_module.hmac, "compare_digest", lambda a, b: compared.append(1) or real(a, b))
    c = TestClient(build_app(engine, api_key="s3cret"))
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "prompt": "hi", "max_tokens": 1}
    for method, path in GUARDED:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            r = c.request(method, path, json=body if method == "POST" else None, headers=headers)
            assert r.status_code == 401, (path, headers)
            assert r.json()["error"]["code"] == "invalid_api_key"
        ok = c.request(method, path, json=body if method == "POST" else None,
                       headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200, (path, ok.text)
    assert c.get("/health").status_code == 200
    assert compared  # hmac.compare_digest: no early exit on the first differing byte


def test_code_shipped_with_a_model_is_never_run(tmp_path):
    d = save_tiny_model_dir(tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(model_type="evil", auto_map={"AutoConfig": "modeling_evil.EvilConfig",
                                            "AutoModelForCausalLM": "modeling_evil.EvilModel"})
    (d / "config.json").write_text(json.dumps(cfg))
    ran = tmp_path / "ran"
    (d / "modeling_evil.py").write_text(f"open({str(ran)!r}, 'w').write('pwned')\n")
    with pytest.raises(ModelError, match="own Python code"):
        load_model(d, dtype=None, device="cpu")
    assert not ran.exists()


def test_logs_never_hold_prompt_text(engine, caplog, monkeypatch):
    """Requests carry a marker in messages, prediction, stop and prompt; some succeed, some are refused,
    one fails inside the engine; nothing logged at any level contains the marker."""
    real = llm_engine.verify_step

    def verify(logits, draft, sampler):
        if sampler.params.seed == 13:
            raise RuntimeError("injected fault")
        return real(logits, draft, sampler)

    monkeypatch.setattr(llm_engine, "verify_step", verify)
    caplog.set_level(logging.DEBUG)
    c = TestClient(build_app(engine))
    msg = [{"role": "user", "content": f"tell me {SECRET}"}]
    bodies = [
        ("/v1/chat/completions", {"model": "tiny", "messages": msg, "max_tokens": 4,
                                  "prediction": {"type": "content", "content": SECRET}, "stop": [SECRET]}),
        ("/v1/chat/completions", {"model": "tiny", "messages": msg, "max_tokens": 4, "stream": True}),
        ("/v1/chat/completions", {"model": "tiny", "messages": msg, "max_tokens": 4, "seed": 13}),  # 500
        ("/v1/chat/completions", {"model": "tiny", "messages": msg, "max_tokens": 4, "seed": 13, "stream": True}),  # 500 before the stream starts
        ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": SECRET, "content": SECRET}]}),
        ("/v1/chat/completions", {"model": SECRET, "messages": msg}),
        ("/v1/chat/completions", {"model": "tiny", "messages": msg, "temperature": SECRET}),
        ("/v1/completions", {"model": "tiny", "prompt": SECRET * 5000, "max_tokens": 4}),
        ("/v1/completions", {"model": "tiny", "prompt": [SECRET], "max_tokens": 4, "logprobs": 2}),
    ]
    statuses = [c.post(path, json=body).status_code for path, body in bodies]
    assert statuses == [200, 200, 500, 500, 400, 404, 400, 400, 200]
    assert "injected fault" in caplog.text  # the failure was logged, without the prompt
    assert SECRET not in caplog.text
