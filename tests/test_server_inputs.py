"""Inputs at the edges, through HTTP on the real engine (tiny model): logprob offsets on multi-byte text,
choices the server could never run, token ids outside the vocabulary, speculation turned off."""

from __future__ import annotations

import json

import httpx
import pytest

from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.core.verify import TokenLogprob
from foretell.engine.async_engine import AsyncEngine
from foretell.engine.llm_engine import LLMEngine
from foretell.server import build_app
from foretell.testing import make_tiny_model, make_tiny_tokenizer
from foretell.testing.server import serve_in_thread

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "def add(a, b):"}], "max_tokens": 8}


@pytest.fixture(scope="module")
def tok():
    return make_tiny_tokenizer()


@pytest.fixture(scope="module")
def server(tok):
    cfg = EngineConfig(measure_cost_curve=False, max_prediction_tokens=256, kv_budget_tokens=4096,
                       max_num_seqs=4, max_queue=4)
    engine = AsyncEngine.from_model(make_tiny_model(seed=5), tok, cfg, "tiny")
    try:
        with serve_in_thread(build_app(engine)) as url:
            yield url
    finally:
        engine.shutdown()


def post(url, path, body):
    return httpx.post(url + path, json=body, timeout=60)


def engine_ids(tok, prompt: str, max_tokens: int, **sampling) -> list[int]:
    """The completion's token ids, from the engine directly (same model, same seed)."""
    engine = LLMEngine(make_tiny_model(seed=5), tok, EngineConfig(measure_cost_curve=False, kv_budget_tokens=4096))
    req = GenerationRequest(tok.encode(prompt), max_tokens, sampling=SamplingParams(**sampling), ignore_eos=True)
    return [t for o in engine.generate([req])[req.request_id] for t in o.new_token_ids]


@pytest.mark.parametrize("step", [1, 2, 3])
def test_completion_text_offsets_on_multibyte_text(tok, step):
    """Tokens that split characters (Ü, ✓, 你, 🐍 are several byte tokens each): each token's text_offset is
    where its text starts in the completion (reference: the tokenizer's own decode of the tokens before it).
    The engine's real per-request state detokenises; the server's completion format reports offsets."""
    from types import SimpleNamespace

    from foretell.core.adaptive_k import CostModel
    from foretell.core.policy import DraftPolicy
    from foretell.engine.detok import TokenTexts
    from foretell.engine.sequence import Sequence
    from foretell.server.formats import ChoiceState, CompletionFormat

    text = "Ünïcödé ✓ 你好 🐍 — naïve café"
    ids = tok.encode(text)
    assert len(ids) > len(text) // 2 and tok.decode(ids) == text
    policy = DraftPolicy(None, CostModel({2: 1.5}))
    seq = Sequence(GenerationRequest([0], len(ids) + 1), tok, frozenset(), limit=len(ids) + 10, policy=policy)
    run, choice, fmt = SimpleNamespace(token_texts=lambda: TokenTexts(tok)), ChoiceState(), CompletionFormat()
    offsets, out_text = [], ""
    for i in range(0, len(ids), step):
        chunk = ids[i : i + step]
        for t in chunk:
            seq.append(t)
        out = seq.output(chunk, [False] * len(chunk), [TokenLogprob(t, -1.0, []) for t in chunk])
        offsets += [item[3] for item in fmt.logprobs(run, choice, out)]
        out_text += out.new_text
    out_text += seq.stopper.take(final=True)
    expected = [len(tok.decode(ids[:i]).rstrip("\ufffd")) for i in range(len(ids))]
    assert out_text == text
    assert offsets == expected


def test_more_choices_than_the_server_can_ever_run_is_400_not_429(server):
    r = post(server, "/v1/chat/completions", {**CHAT, "n": 9})  # 4 running + 4 queued
    assert r.status_code == 400 and r.json()["error"]["param"] == "n"
    assert post(server, "/v1/chat/completions", {**CHAT, "n": 8}).status_code == 200


def test_prediction_token_ids_outside_the_vocabulary_are_refused(tok):
    engine = LLMEngine(make_tiny_model(seed=5), tok, EngineConfig(measure_cost_curve=False, kv_budget_tokens=4096))
    vocab = engine.runner.vocab_size
    for bad in ((1, vocab), (-1,)):
        req = GenerationRequest(tok.encode("hi"), 4, speculation=SpeculationParams(prediction=bad))
        with pytest.raises(ValueError, match="prediction"):
            engine.add_request(req)
    assert not engine.has_unfinished()


@pytest.mark.parametrize("adaptive", [True, False])
def test_k_max_zero_proposes_nothing_in_every_path(tok, adaptive):
    """Engine-wide k_max=0 and a request's speculation.k_max=0, with adaptive k on and off: no draft token
    is ever proposed, however good the prediction."""
    model = make_tiny_model(seed=5)
    prompt = tok.encode("def add(a, b):")
    plain = engine_ids(tok, "def add(a, b):", 24, temperature=0.0)
    for engine_k, request_k in ((0, None), (16, 0)):
        cfg = EngineConfig(measure_cost_curve=False, kv_budget_tokens=4096, k_max=engine_k, adaptive_k=adaptive)
        engine = LLMEngine(model, tok, cfg)
        spec = SpeculationParams(prediction=tuple(plain), k_max=request_k)
        req = GenerationRequest(prompt, 24, sampling=SamplingParams(temperature=0.0), speculation=spec, ignore_eos=True)
        outs = engine.generate([req])[req.request_id]
        assert [t for o in outs for t in o.new_token_ids] == plain
        assert outs[-1].stats.draft_tokens_proposed == 0 and outs[-1].stats.forward_passes >= 24
    spec = SpeculationParams(prediction=tuple(plain))  # the control: the same prediction is used when allowed
    engine = LLMEngine(model, tok, EngineConfig(measure_cost_curve=False, kv_budget_tokens=4096, adaptive_k=adaptive))
    req = GenerationRequest(prompt, 24, sampling=SamplingParams(temperature=0.0), speculation=spec, ignore_eos=True)
    assert engine.generate([req])[req.request_id][-1].stats.draft_tokens_proposed > 0
