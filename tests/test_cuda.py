"""The engine on a CUDA device: the lossless matrix of test_engine (perfect, edited, renamed, garbage, empty,
over-long and half predictions, batched), token trees, seeded sampling, a draft model and freed memory, run
with tiny random fp32 models on the GPU. The test functions are test_engine's, test_tree's and
test_drafter's own, collected here with this module's fixtures, which put the models on the GPU.

Skipped (loudly) where torch sees no CUDA device: CI and the development machines have none; a lent GPU
machine runs it (docs/GPU.md)."""

from __future__ import annotations

import random

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("no CUDA device here: the engine's CUDA tests run only on a machine with a GPU (docs/GPU.md)",
                allow_module_level=True)

import test_drafter
import test_engine
import test_tree
from foretell.config import EngineConfig
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import ExactModeUnavailable, ModelRunner, Segment
from foretell.testing import make_tiny_model, make_tiny_tokenizer

CUDA = torch.device("cuda")


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def model(request):
    return make_tiny_model(arch=request.param, seed=1).to(CUDA)


@pytest.fixture(scope="module")
def tokenizer():
    return make_tiny_tokenizer()


@pytest.fixture(scope="module")
def target():
    return make_tiny_model(seed=1).to(CUDA)


@pytest.fixture(scope="module")
def drafter_model():
    return test_drafter.noisy_copy(make_tiny_model(seed=1), 0.5, seed=7).to(CUDA)


test_plain_engine_matches_hf_generate = test_engine.test_plain_engine_matches_hf_generate
test_prediction_is_lossless = test_engine.test_prediction_is_lossless
test_concurrent_requests_join_and_leave = test_engine.test_concurrent_requests_join_and_leave
test_seeded_sampling_identical_with_prediction = test_engine.test_seeded_sampling_identical_with_prediction
test_penalties_identical_with_prediction = test_engine.test_penalties_identical_with_prediction
test_stop_strings_and_max_tokens_cut_like_plain_decoding = test_engine.test_stop_strings_and_max_tokens_cut_like_plain_decoding
test_cancel_frees_kv = test_engine.test_cancel_frees_kv
test_prefix_cache_reuses_prompt_and_stays_exact = test_engine.test_prefix_cache_reuses_prompt_and_stays_exact
test_chunked_prefill_is_exact = test_engine.test_chunked_prefill_is_exact
test_engine_follows_the_winning_branch_exactly = test_tree.test_engine_follows_the_winning_branch_exactly
test_greedy_draft_model_output_is_the_targets_greedy_output = (
    test_drafter.test_greedy_draft_model_output_is_the_targets_greedy_output)


def test_the_engine_runs_on_the_gpu(model, tokenizer):
    """The KV cache and the logits live on the GPU (nothing silently falls back to the CPU)."""
    engine = test_engine.make_engine(model, tokenizer)
    assert engine.runner.kv_shape.device.type == "cuda"
    engine.generate([test_engine.request(tokenizer.encode("def add(a, b):"), 8, request_id="0")])
    assert torch.cuda.memory_allocated() > 0


def test_packed_attention_never_runs_cudnns_attention(model, tokenizer, monkeypatch):
    """cuDNN's SDPA builds a graph per shape, and a decode step's key length is new at every step (94 ms per
    token on an H100 for the 0.5B in bf16, 31 ms without it): every attention call of a pass runs with it off."""
    from foretell.engine import runner

    states, sdpa = [], runner.F.scaled_dot_product_attention

    def recording(*args, **kwargs):
        states.append(torch.backends.cuda.cudnn_sdp_enabled())
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(runner.F, "scaled_dot_product_attention", recording)
    engine = test_engine.make_engine(model, tokenizer)
    engine.generate([test_engine.request(tokenizer.encode("def add(a, b):"), 8, request_id="0")])
    assert states and not any(states)
    assert torch.backends.cuda.cudnn_sdp_enabled()  # PyTorch's own setting is back outside the passes


def test_a_cancelled_request_gives_its_gpu_memory_back(model, tokenizer):
    engine = test_engine.make_engine(model, tokenizer, prefix_cache=False)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    engine.add_request(GenerationRequest(prompt_ids=tokenizer.encode("class Snake:") * 20, max_tokens=500,
                                         ignore_eos=True, request_id="x"))
    for _ in range(5):
        engine.step()
    assert torch.cuda.memory_allocated() > before
    assert engine.abort("x") and not engine.has_unfinished()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


def test_exact_mode_is_refused_or_row_invariant_on_the_gpu(tokenizer):
    """Exact mode's start-up probe either refuses this GPU's kernels (cuBLAS picks kernels by shape) or, where
    it accepts them, greedy outputs with predictions equal plain decoding in bf16, batched."""
    model = make_tiny_model(seed=5, dtype=torch.bfloat16, hidden_size=128, init_scale=0.02).to(CUDA)
    try:
        runner = ModelRunner(model, exact=True)
    except ExactModeUnavailable as exc:
        assert "exact mode" in str(exc)
        pytest.skip(f"exact mode refused on this GPU, as documented: {exc}")
    cfg = dict(max_num_seqs=8, kv_budget_tokens=16384, prefill_chunk=64, k_max=32, measure_cost_curve=False, exact=True)
    ps = test_engine.prompts(tokenizer, 4, seed=2)
    plain = test_engine.run(LLMEngine(runner, tokenizer, EngineConfig(**cfg, )),
                            [test_engine.request(p, 48, method="none", request_id=str(i)) for i, p in enumerate(ps)])
    got = test_engine.run(LLMEngine(runner, tokenizer, EngineConfig(**cfg)),
                          [test_engine.request(p, 48, prediction=plain[str(i)][::2], request_id=str(i))
                           for i, p in enumerate(ps)])
    assert got == plain


def test_exact_mode_gives_each_position_the_same_bits_in_any_pass_at_the_default_models_widths():
    """The default model's widths (896 -> 4864 MLP, a 151,936-token head), 2 layers, bf16. On an H200 the real
    0.5B left plain decoding's output in exact mode (a port to JS: first 133 tokens equal) while each linear
    call took its rows as they came: cuBLAS picks its kernel by the number of rows, and a pass that carries
    the prompt's last chunk and the first draft has hundreds. With every linear layer and norm on fixed blocks
    (FixedRows) the output was identical. Every position's logits must have the same bits in a verify pass of
    any length, and with the draft riding on the prompt, as in one-token passes."""
    assert_exact_at_default_widths(CUDA)


def assert_exact_at_default_widths(device) -> None:
    from transformers import AutoModelForCausalLM, Qwen2Config

    import test_exact

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=2,
                         num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True,
                         initializer_range=0.02)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).to(device).eval()
    runner = ModelRunner(model, exact=True)
    rng = random.Random(0)
    prompt = [rng.randrange(config.vocab_size) for _ in range(301)]
    follow = [rng.randrange(config.vocab_size) for _ in range(128)]
    reference = test_exact.one_token_logits(runner, prompt, follow)
    for k in (1, 2, 3, 7, 16, 33, 64, 100, 128):
        kv = test_exact.new_kv(runner)
        test_exact.prefill(runner, kv, prompt[:-1], 16)
        logits = runner.forward([Segment(kv, [prompt[-1]] + follow[:k], num_logits=k + 1)])[0]
        assert torch.equal(logits, reference[: k + 1]), f"a verify pass of {k} tokens changed some bits"
    # the prompt as one chunk, then one token per pass (plain decoding), against the first draft riding on
    # the prompt (the prediction's first pass): the prompt's keys and values must not change either
    kv = test_exact.new_kv(runner)
    rows = [runner.forward([Segment(kv, prompt, num_logits=1)])[0]]
    kv.length = len(prompt)
    for token in follow[:65]:
        rows.append(runner.forward([Segment(kv, [token], num_logits=1)])[0])
        kv.length += 1
    plain = torch.cat(rows)
    for k in (8, 64):
        kv = test_exact.new_kv(runner)
        logits = runner.forward([Segment(kv, prompt + follow[:k], num_logits=k + 1)])[0]
        assert torch.equal(logits, plain[: k + 1]), f"a draft of {k} riding on the prompt changed some bits"
        kv.length = len(prompt) + k
        logits = runner.forward([Segment(kv, follow[k:k + 1], num_logits=1)])[0]
        assert torch.equal(logits, plain[k + 1 : k + 2]), "the prompt's keys and values changed"
