"""The KV budget bounds the memory actually held: buffers grow by doubling, so a cached prefix holds up to
twice its length; the accounting must count what the tensors occupy."""

from __future__ import annotations

import random

from foretell.config import EngineConfig, SamplingParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.testing import make_tiny_model, make_tiny_tokenizer


def held_bytes(engine: LLMEngine) -> int:
    """Bytes of every KV tensor alive in the pool (running sequences and the prefix cache), from the tensors."""
    kvs = [s.kv for s in engine.running if s.kv is not None] + [e.kv for e in engine.pool.cache.values()]
    return sum(t.numel() * t.element_size() for kv in kvs for t in kv.keys + kv.values + kv.tiles)


def test_budget_counts_the_memory_the_buffers_hold():
    tok = make_tiny_tokenizer()
    budget = 512
    cfg = EngineConfig(measure_cost_curve=False, kv_budget_tokens=budget, max_num_seqs=2, k_max=8)
    engine = LLMEngine(make_tiny_model(seed=2), tok, cfg)
    per_token = engine.runner.kv_shape.bytes_per_token
    rng = random.Random(0)
    words = ["def", "add", "class", "Snake", "for", "print", "return", "self", "body", "head"]
    worst = 0
    for i in range(6):
        prompt = tok.encode(" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))))
        req = GenerationRequest(prompt, rng.randint(20, 50), sampling=SamplingParams(temperature=0.0), ignore_eos=True)
        engine.add_request(req)
        while engine.has_unfinished():
            engine.step()
            held = held_bytes(engine)
            assert held <= engine.pool.used_tokens * per_token  # the accounting never under-counts
            worst = max(worst, held)
    assert engine.pool.cache, "finished requests should stay in the prefix cache"
    assert held_bytes(engine) == engine.pool.used_tokens * per_token
    assert worst <= budget * per_token  # so the budget bounds real memory
