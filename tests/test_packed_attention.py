"""The packed attention gives the logits of the unmodified model, for every segment size: one query (the
query heads packed per KV head), a few queries (packed, with a mask), many (``enable_gqa``), and a batch."""

from __future__ import annotations

import pytest
import torch

from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import PACKED_GQA_QUERIES, ModelRunner, Segment
from foretell.testing import make_tiny_model


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def runner(request):
    model = make_tiny_model(arch=request.param, seed=5)
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # grouped-query attention
    return ModelRunner(model)


def _reference(model, ids: list[int]) -> torch.Tensor:
    """Logits of the model called normally (transformers' own attention path) over the whole sequence."""
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float()


@pytest.mark.parametrize("n", [1, 2, PACKED_GQA_QUERIES, PACKED_GQA_QUERIES + 1, 20])
def test_segment_logits_equal_the_models_own(runner, n):
    gen = torch.Generator().manual_seed(n)
    ids = torch.randint(3, runner.vocab_size, (40 + n,), generator=gen).tolist()
    prefix, new = ids[:40], ids[40:]
    kv = SeqKV(runner.kv_shape, capacity=128, max_capacity=128)
    runner.forward([Segment(kv, prefix, num_logits=0)])
    kv.length = len(prefix)
    other = SeqKV(runner.kv_shape, capacity=128, max_capacity=128)  # a second sequence in the same pass
    alone = runner.forward([Segment(kv, new, num_logits=n)])[0]
    batched = runner.forward([Segment(other, ids[:7], num_logits=1), Segment(kv, new, num_logits=n)])[1]
    expected = _reference(runner.model, ids)[40:]
    torch.testing.assert_close(alone, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(batched, expected, rtol=1e-4, atol=1e-4)
