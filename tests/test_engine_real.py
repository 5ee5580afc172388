"""The packaged default model (Qwen2.5-Coder-0.5B-Instruct) in fp32: same greedy tokens with and without a
prediction. Slow-ish (model conversion once, ~1 min of decoding on 2 cores); CI runs it."""

from __future__ import annotations

import pytest

from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest

pytestmark = pytest.mark.realmodel

SNIPPET = '''def area(width, height):
    """Return the area of a rectangle."""
    return width * height


def perimeter(width, height):
    return 2 * (width + height)
'''

TASKS = [
    ("Reproduce this code exactly, no commentary:\n\n" + SNIPPET, SNIPPET),
    ("Add type hints to this code. Reply with the code only.\n\n" + SNIPPET, SNIPPET),
    ("Write a haiku about the sea.", SNIPPET),  # an unrelated prediction
]


@pytest.fixture(scope="module")
def engine():
    from foretell.engine.llm_engine import LLMEngine

    engine, _ = LLMEngine.from_config(EngineConfig(dtype="float32", measure_cost_curve=False, k_max=64))
    return engine


def _run(engine, prompt_ids, prediction, max_tokens=48):
    spec = SpeculationParams(prediction=prediction, method="auto" if prediction is not None else "none")
    req = GenerationRequest(prompt_ids=prompt_ids, max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0), speculation=spec)
    outs = engine.generate([req])[req.request_id]
    return [t for o in outs for t in o.new_token_ids], outs[-1].stats


def test_default_model_greedy_identical_with_prediction(engine):
    tok = engine.tokenizer
    for instruction, predicted in TASKS:
        text = tok.apply_chat_template([{"role": "user", "content": instruction}], add_generation_prompt=True, tokenize=False)
        prompt_ids = tok.encode(text, add_special_tokens=False)
        prediction = tuple(tok.encode(predicted, add_special_tokens=False))
        plain, plain_stats = _run(engine, prompt_ids, None)
        spec, spec_stats = _run(engine, prompt_ids, prediction)
        assert spec == plain, instruction
        assert spec_stats.completion_tokens == plain_stats.completion_tokens
        assert spec_stats.accepted_prediction_tokens <= spec_stats.completion_tokens
