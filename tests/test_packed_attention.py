"""The packed attention gives the logits of the unmodified model, for every segment size: one query (the
query heads packed per KV head), a few queries (packed, with a mask), many (``enable_gqa``), and a batch; on
both routes: SDPA, and foretell's CPU attention (``cpu_gemm.c``) for every query of a chain."""

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
    # a prompt chunk whose last tokens need logits (the first draft riding on the prompt), on the route
    # under test
    riding = SeqKV(runner.kv_shape, capacity=128, max_capacity=128)
    torch.testing.assert_close(runner.forward([Segment(riding, ids, num_logits=n)])[0], expected,
                               rtol=1e-4, atol=1e-4)


def _spy_on(kernel, monkeypatch) -> list[tuple[int, list[int], list[int]]]:
    """Record each attention call of ``kernel``: (queries, first keys, end keys)."""
    calls = []
    real = kernel.attention

    def spy(query, keys, values, first, end, scale, *tiles):
        calls.append((query.shape[1], list(first), list(end)))
        return real(query, keys, values, first, end, scale, *tiles)

    monkeypatch.setattr(kernel, "attention", spy)
    return calls


def test_every_query_of_a_chain_goes_to_the_kernel_in_one_call(runner, monkeypatch):
    """A prompt chunk's queries and those that need logits alike: one kernel call per layer and segment, each
    query over keys [0, its position + 1)."""
    if runner.attention_kernel is None:
        pytest.skip("the SDPA route")
    calls = _spy_on(runner.attention_kernel, monkeypatch)
    layers = runner.model.config.num_hidden_layers
    kv = SeqKV(runner.kv_shape, capacity=128, max_capacity=128)
    runner.forward([Segment(kv, list(range(3, 23)), num_logits=0)])  # a mid-prompt chunk
    assert calls == [(20, [0] * 20, list(range(1, 21)))] * layers
    calls.clear()
    kv.length = 20
    runner.forward([Segment(kv, list(range(3, 13)), num_logits=5)])  # the last chunk with a riding draft
    assert calls == [(10, [0] * 10, list(range(21, 31)))] * layers


@pytest.mark.parametrize("route", ["sdpa", "kernel"])
def test_a_sliding_window_holds_for_prompt_chunks_and_drafts(route):
    """A model whose layers attend over a sliding window of 8 keys: a prompt in chunks (the chunks' queries,
    then the last chunk with tokens that need logits) gives the model's own logits on both routes."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    from foretell.testing import make_tiny_tokenizer

    torch.manual_seed(3)
    config = Qwen2Config(vocab_size=len(make_tiny_tokenizer()), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         use_sliding_window=True, sliding_window=8, max_window_layers=0, tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(config).eval()
    assert set(config.layer_types) == {"sliding_attention"}
    runner = ModelRunner(model, cpu_attention=route == "kernel")
    if route == "kernel" and runner.attention_kernel is None:
        pytest.skip("foretell's CPU kernel does not build here")
    assert runner.lean  # its start-up probe leaves out the token tree, which a sliding window does not take
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, runner.vocab_size, (36,), generator=gen).tolist()
    expected = _reference(model, ids)
    kv = SeqKV(runner.kv_shape, capacity=64, max_capacity=64)
    runner.forward([Segment(kv, ids[:20], num_logits=0)])
    kv.length = 20
    got = runner.forward([Segment(kv, ids[20:], num_logits=10)])[0]
    torch.testing.assert_close(got, expected[26:], rtol=1e-4, atol=1e-4)


def test_bf16_on_amx_attends_through_sdpa_but_exact_modes_logit_rows(monkeypatch):
    """Where SDPA is the faster (bf16 on a CPU with AMX, stood in for here), the default mode attends through
    SDPA only, and exact mode sends only the queries that need logits to the kernel (its prompt chunks to
    SDPA); fp32 keeps the kernel for every query."""
    from foretell.models import loader

    if cpu_gemm.load() is None:
        pytest.skip("foretell's CPU kernel does not build here")
    monkeypatch.setattr(loader, "cpu_has_amx", lambda: True)
    default = ModelRunner(make_tiny_model(seed=5, dtype=torch.bfloat16))
    assert default.attention_kernel is None and default.chunk_attention_kernel is None
    fp32 = ModelRunner(make_tiny_model(seed=5))
    assert fp32.attention_kernel is not None and fp32.chunk_attention_kernel is fp32.attention_kernel
    exact = ModelRunner(make_tiny_model(seed=5, dtype=torch.bfloat16), exact=True)
    assert exact.attention_kernel is not None and exact.chunk_attention_kernel is None
    calls = _spy_on(exact.attention_kernel, monkeypatch)
    ids = list(range(3, 23))
    kv = SeqKV(exact.kv_shape, capacity=128, max_capacity=128)
    got = exact.forward([Segment(kv, ids, num_logits=5)])[0]
    assert calls == [(5, [0] * 5, [16, 17, 18, 19, 20])] * exact.model.config.num_hidden_layers
    reference = _reference(exact.model, ids)[15:]
    torch.testing.assert_close(got, reference, rtol=0.05, atol=0.05 * reference.abs().max().item())
