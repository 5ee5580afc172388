"""Models whose attention the packed attention would get wrong are refused with a clear message, never
served with silently wrong outputs."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, Gemma2Config, GptOssConfig

from foretell.engine.runner import ModelRunner, UnsupportedModelError, _packed_attention
from foretell.testing import make_tiny_model

SMALL = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, max_position_embeddings=128)


@pytest.mark.parametrize(
    "config, feature",
    [
        (Gemma2Config(**SMALL, attn_logit_softcapping=50.0), "soft-capping"),
        (GptOssConfig(**{**SMALL, "num_local_experts": 2, "num_experts_per_tok": 1}), "sinks"),
    ],
    ids=["gemma2-softcap", "gpt-oss-sinks"],
)
def test_models_with_unsupported_attention_are_refused(config, feature):
    model = AutoModelForCausalLM.from_config(config)
    with pytest.raises(UnsupportedModelError, match=feature):
        ModelRunner(model)


def test_the_packed_attention_never_ignores_a_softcap_or_sinks():
    q = k = v = torch.zeros(1, 2, 3, 4)

    class Module:
        layer_idx = 0

    for extra in ({"softcap": 30.0}, {"s_aux": torch.zeros(2)}):
        with pytest.raises(UnsupportedModelError):
            _packed_attention(Module(), q, k, v, None, foretell_batch=object(), **extra)


def test_supported_models_still_load():
    ModelRunner(make_tiny_model(arch="llama"))
    ModelRunner(make_tiny_model(arch="qwen2"))
