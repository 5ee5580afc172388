"""The server's engine is built in the thread that steps it: one thread runs every parallel region.

Loading the model in the main thread and stepping it in another left two OpenMP pools in the process, more
OpenMP threads than cores, and libgomp then sleeps idle workers between regions: the server's steps took 1.5x
the engine's own (async_engine's module docstring). These tests check where the work runs, not its speed.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from foretell.config import EngineConfig, SamplingParams
from foretell.engine import async_engine
from foretell.engine.api import GenerationRequest
from foretell.engine.async_engine import AsyncEngine
from foretell.engine.llm_engine import LLMEngine
from foretell.models.default_model import ModelError
from foretell.testing import make_tiny_model, make_tiny_tokenizer

CONFIG = EngineConfig(measure_cost_curve=False, kv_budget_tokens=2048, max_model_len=256)


def _generate(engine: AsyncEngine, max_tokens: int = 6) -> list[int]:
    async def run() -> list[int]:
        req = GenerationRequest(prompt_ids=[5, 6, 7], max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0))
        tokens: list[int] = []
        async for out in engine.generate(req):
            tokens += out.new_token_ids
        return tokens

    return asyncio.run(run())


class _Recording(LLMEngine):
    """An LLMEngine that records the threads it was built and stepped in."""

    built_in: list[threading.Thread] = []
    stepped_in: set[threading.Thread] = set()

    def __init__(self, *args, **kwargs):
        _Recording.built_in.append(threading.current_thread())
        super().__init__(*args, **kwargs)

    def step(self):
        _Recording.stepped_in.add(threading.current_thread())
        return super().step()


@pytest.fixture
def recording(monkeypatch):
    _Recording.built_in, _Recording.stepped_in = [], set()
    monkeypatch.setattr(async_engine, "LLMEngine", _Recording)
    return _Recording


def test_from_model_builds_and_steps_the_engine_in_its_step_thread(recording):
    engine = AsyncEngine.from_model(make_tiny_model(), make_tiny_tokenizer(), CONFIG, "tiny")
    try:
        tokens = _generate(engine)
    finally:
        engine.shutdown()
    assert len(tokens) == 6
    assert recording.built_in == [engine._thread] and recording.stepped_in == {engine._thread}
    assert engine._thread is not threading.main_thread()
    assert engine.model_name == "tiny"


def test_from_config_builds_in_the_step_thread(recording, monkeypatch):
    def from_config(config):
        return recording(make_tiny_model(), make_tiny_tokenizer(), config), "tiny-from-config"

    monkeypatch.setattr(recording, "from_config", staticmethod(from_config))
    engine = AsyncEngine.from_config(CONFIG)
    try:
        assert len(_generate(engine, 3)) == 3
    finally:
        engine.shutdown()
    assert recording.built_in == [engine._thread] and recording.stepped_in == {engine._thread}
    assert engine.model_name == "tiny-from-config"


def test_a_build_that_fails_raises_in_the_caller():
    def build():
        raise ModelError("the model is missing")

    with pytest.raises(ModelError, match="missing"):
        AsyncEngine.built(build)


def test_an_engine_built_before_is_served_as_it_was():
    built = LLMEngine(make_tiny_model(), make_tiny_tokenizer(), CONFIG)
    engine = AsyncEngine(built, "tiny")
    try:
        assert engine.engine is built and len(_generate(engine, 4)) == 4
    finally:
        engine.shutdown()
