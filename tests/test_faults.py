"""Faults inside the engine stay with the request that caused them: it fails (500 internal error, or 503
when memory for it ran out) and every other request goes on, with the same output it has alone."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine import llm_engine
from foretell.engine.api import GenerationRequest, RequestFailedError
from foretell.engine.async_engine import AsyncEngine
from foretell.engine.llm_engine import LLMEngine
from foretell.testing import make_tiny_model, make_tiny_tokenizer

BAD_SEED = 666


@pytest.fixture(scope="module")
def model():
    return make_tiny_model(seed=3)


@pytest.fixture(scope="module")
def tok():
    return make_tiny_tokenizer()


def engine(model, tok, **kw) -> LLMEngine:
    cfg = dict(measure_cost_curve=False, kv_budget_tokens=4096, k_max=8)
    return LLMEngine(model, tok, EngineConfig(**{**cfg, **kw}))


def req(tok, text="def add(a, b):", seed=0, max_tokens=24, **sampling):
    sp = SamplingParams(**{"temperature": 0.0, "seed": seed, **sampling})
    return GenerationRequest(tok.encode(text), max_tokens, sampling=sp, request_id=f"r{seed}-{text[:5]}")


def tokens_of(outs) -> list[int]:
    return [t for o in outs for t in o.new_token_ids]


def alone(model, tok, r) -> list[int]:
    return tokens_of(engine(model, tok).generate([r])[r.request_id])


@pytest.mark.parametrize(
    "sampling",
    [
        dict(repetition_penalty=1e-300),
        dict(temperature=1.0, repetition_penalty=1e-300),
        dict(temperature=1e-300),
        dict(temperature=0.7, top_p=0.9, min_p=0.1, repetition_penalty=1e-300),
    ],
)
def test_settings_that_overflow_logits_still_give_tokens_in_the_vocabulary(model, tok, sampling):
    """repetition_penalty 1e-300 divides logits into +inf and a softmax over +inf is NaN: the sampler used
    to draw the id ``vocab`` and the next pass failed every request in it."""
    r = req(tok, seed=1, **sampling)
    outs = engine(model, tok).generate([r])[r.request_id]
    assert outs[-1].finish_reason in ("stop", "length")
    assert all(0 <= t < len(tok) + 64 for t in tokens_of(outs)) and tokens_of(outs)
    with_prediction = GenerationRequest(r.prompt_ids, r.max_tokens, sampling=r.sampling,
                                        speculation=SpeculationParams(prediction=tuple(tokens_of(outs))))
    again = engine(model, tok).generate([with_prediction])[with_prediction.request_id]
    assert tokens_of(again) == tokens_of(outs)  # still lossless


def _failing_verify(real):
    def verify(logits, draft, sampler):
        if sampler.params.seed == BAD_SEED:
            raise RuntimeError("injected fault")
        return real(logits, draft, sampler)

    return verify


def test_a_request_failing_in_verification_fails_alone(model, tok, monkeypatch):
    good = [req(tok, seed=1), req(tok, "class Snake:", seed=2)]
    expected = {r.request_id: alone(model, tok, r) for r in good}
    monkeypatch.setattr(llm_engine, "verify_step", _failing_verify(llm_engine.verify_step))
    e = engine(model, tok)
    bad = req(tok, "for i in", seed=BAD_SEED)
    outs = e.generate([good[0], bad, good[1]])
    assert outs[bad.request_id][-1].finish_reason == "error"
    assert isinstance(outs[bad.request_id][-1].error, RequestFailedError)
    for r in good:
        assert tokens_of(outs[r.request_id]) == expected[r.request_id]
    assert e.pool.reserved_tokens == 0 and not e.running


def test_a_request_failing_in_the_forward_pass_fails_alone(model, tok):
    """The packed pass raises whenever the bad request's segment is in it (as an out-of-range id would):
    the engine retries the segments one by one and pins the failure on that request."""
    good = [req(tok, seed=1), req(tok, "class Snake:", seed=2)]
    expected = {r.request_id: alone(model, tok, r) for r in good}
    e = engine(model, tok)
    bad = req(tok, "for i in", seed=BAD_SEED)
    real = e.runner.forward

    def forward(segments, **kwargs):
        if any(seg.kv is e_bad_kv() for seg in segments):
            raise IndexError("index out of range in self")
        return real(segments, **kwargs)

    def e_bad_kv():
        seq = next((s for s in e.running if s.id == bad.request_id), None)
        return None if seq is None else seq.kv

    e.runner.forward = forward
    outs = e.generate([good[0], bad, good[1]])
    assert outs[bad.request_id][-1].finish_reason == "error"
    for r in good:
        assert tokens_of(outs[r.request_id]) == expected[r.request_id]


def test_an_allocation_failure_fails_that_request_and_does_not_hang(model, tok, monkeypatch):
    """Its KV buffers cannot be allocated: it used to be popped from the queue and never answered."""
    e = AsyncEngine(engine(model, tok), "tiny")
    real = e.engine.pool.allocate

    def allocate(seq_id, reserve, prompt, **kw):
        if seq_id.startswith(f"r{BAD_SEED}"):
            raise torch.OutOfMemoryError("injected: no memory for the KV buffers")
        return real(seq_id, reserve, prompt, **kw)

    monkeypatch.setattr(e.engine.pool, "allocate", allocate)

    async def collect(r):
        return [o async for o in e.generate(r)]

    async def main():
        return await asyncio.wait_for(
            asyncio.gather(collect(req(tok, seed=BAD_SEED)), collect(req(tok, seed=1)), return_exceptions=True), 30
        )

    try:
        bad, good = asyncio.run(main())
    finally:
        e.shutdown()
    assert isinstance(bad, RequestFailedError) and bad.status == 503 and bad.code == "out_of_memory"
    assert tokens_of(good) == alone(model, tok, req(tok, seed=1))
    assert e.engine.pool.reserved_tokens == 0


def test_metrics_never_read_engine_state_from_another_thread(model, tok):
    """The engine's queues and KV pool change while a step runs; /metrics must not read them from the
    event loop's thread (a dict changing size during iteration raises, counts come out torn)."""
    e = AsyncEngine(engine(model, tok), "tiny")
    pool = e.engine.pool
    owner = e._thread

    class GuardedPool(type(pool)):
        @property
        def used_tokens(self):
            assert threading.current_thread() is owner, "KV pool read outside the engine thread"
            return super().used_tokens

    try:
        asyncio.run(_run_one(e, req(tok, seed=1)))
        pool.__class__ = GuardedPool
        asyncio.run(_run_one(e, req(tok, seed=2)))
        m = e.metrics()
    finally:
        e.shutdown()
    assert m["running"] == 0 and m["kv_tokens_total"] == 4096 and m["forward_passes"] > 0


async def _run_one(e, r):
    return [o async for o in e.generate(r)]
