"""The packed attention gives the logits of the unmodified model, for every segment size: one query (the
query heads packed per KV head), a few queries (packed, with a mask), many (``enable_gqa``), and a batch; on
both routes for the queries that need logits: SDPA, and foretell's CPU attention (``cpu_gemm.c``)."""

from __future__ import annotations

import pytest
import torch

from foretell.engine import cpu_gemm
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import PACKED_GQA_QUERIES, ModelRunner, Segment
from foretell.testing import make_tiny_model


@pytest.fixture(scope="module", params=["qwen2/sdpa", "llama/sdpa", "qwen2/kernel", "llama/kernel"])
def runner(request):
    arch, route = request.param.split("/")
    model = make_tiny_model(arch=arch, seed=5)
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # grouped-query attention
    built = ModelRunner(model, cpu_attention=route == "kernel")
    if route == "kernel" and built.attention_kernel is None:
        if cpu_gemm.load() is not None:
            pytest.fail("foretell's CPU attention builds here but the runner does not use it")
        pytest.skip("foretell's CPU kernel does not build here")
    assert route == "kernel" or built.attention_kernel is None
    return built


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
    # a prompt chunk whose last tokens need logits (the first draft riding on the prompt): SDPA for the
    # chunk, the logit rows on the route under test
    riding = SeqKV(runner.kv_shape, capacity=128, max_capacity=128)
    torch.testing.assert_close(runner.forward([Segment(riding, ids, num_logits=n)])[0], expected,
                               rtol=1e-4, atol=1e-4)


def test_the_rows_that_need_logits_go_to_the_kernel_and_a_chunk_to_sdpa(runner, monkeypatch):
    if runner.attention_kernel is None:
        pytest.skip("the SDPA route")
    calls = []
    real = runner.attention_kernel.attention

    def spy(query, keys, values, first, end, scale):
        calls.append((query.shape[1], list(first), list(end)))
        return real(query, keys, values, first, end, scale)

    monkeypatch.setattr(runner.attention_kernel, "attention", spy)
    kv = SeqKV(runner.kv_shape, capacity=128, max_capacity=128)
    runner.forward([Segment(kv, list(range(3, 23)), num_logits=0)])  # a mid-prompt chunk: SDPA only
    assert calls == []
    runner.forward([Segment(kv, list(range(3, 23)), num_logits=5)])  # the last chunk with a riding draft
    layers = runner.model.config.num_hidden_layers
    assert calls == [(5, [0] * 5, [16, 17, 18, 19, 20])] * layers
