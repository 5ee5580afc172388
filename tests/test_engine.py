"""The engine is lossless: with any prediction, greedy output equals plain greedy decoding (fp32)."""

from __future__ import annotations

import difflib
import random
from dataclasses import replace

import pytest
import torch

from foretell.config import ConfigError, EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest, QueueFullError, RequestTooLongError
from foretell.engine.kv_cache import SeqKV
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import ModelRunner, Segment
from foretell.testing import make_tiny_model, make_tiny_tokenizer

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def model(request):
    return make_tiny_model(arch=request.param, seed=1)


@pytest.fixture(scope="module")
def tokenizer():
    return make_tiny_tokenizer()


def make_engine(model, tokenizer, **overrides) -> LLMEngine:
    cfg = dict(max_num_seqs=8, kv_budget_tokens=16384, prefill_chunk=64, k_max=32, measure_cost_curve=False)
    cfg.update(overrides)
    return LLMEngine(model, tokenizer, EngineConfig(**cfg))


def hf_greedy(model, prompt: list[int], max_new: int, eos: int) -> list[int]:
    out = model.generate(
        torch.tensor([prompt], device=model.device), max_new_tokens=max_new, do_sample=False, eos_token_id=eos, pad_token_id=eos
    )[0, len(prompt) :].tolist()
    return out[: out.index(eos) + 1] if eos in out else out


def run(engine: LLMEngine, requests: list[GenerationRequest]) -> dict[str, list[int]]:
    outs = engine.generate(requests)
    return {rid: [t for o in chunks for t in o.new_token_ids] for rid, chunks in outs.items()}


def request(prompt, max_tokens=40, prediction=None, sampling=GREEDY, **kw) -> GenerationRequest:
    spec = SpeculationParams(prediction=None if prediction is None else tuple(prediction), method=kw.pop("method", "auto"))
    return GenerationRequest(prompt_ids=list(prompt), max_tokens=max_tokens, sampling=sampling, speculation=spec, **kw)


def prompts(tokenizer, n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    texts = ["def add(a, b):", "class Snake:", "for i in range(10):", "Hello, world!", "The quick brown fox"]
    return [tokenizer.encode(rng.choice(texts) + " " * rng.randint(0, 3) + str(i)) for i in range(n)]


def edited(tokens: list[int], rng: random.Random, vocab: int) -> list[int]:
    out = list(tokens)
    for _ in range(3):
        i = rng.randrange(len(out) + 1)
        op = rng.choice(["ins", "del", "sub"])
        if op == "ins":
            out[i:i] = [rng.randrange(vocab) for _ in range(rng.randint(1, 4))]
        elif out:
            j = min(len(out), i + rng.randint(1, 4))
            out[i:j] = [] if op == "del" else [rng.randrange(vocab) for _ in range(j - i)]
    return out


def renamed(tokens: list[int], vocab: int) -> list[int]:
    """The output with its most frequent token X replaced by a token Y it never uses: against this prediction
    the model renames Y to X at every use."""
    x = max(set(tokens), key=tokens.count) if tokens else None
    y = next(t for t in range(vocab - 1, 0, -1) if t not in tokens)
    return [y if t == x else t for t in tokens]


def test_plain_engine_matches_hf_generate(model, tokenizer):
    engine = make_engine(model, tokenizer, k_max=0)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    ps = prompts(tokenizer, 3)
    got = run(engine, [request(p, request_id=str(i)) for i, p in enumerate(ps)])
    for i, p in enumerate(ps):
        assert got[str(i)] == hf_greedy(model, p, 40, eos)


@pytest.mark.parametrize("kind", ["perfect", "edited", "renamed", "garbage", "empty", "overlong", "prefix"])
def test_prediction_is_lossless(model, tokenizer, kind):
    vocab = len(tokenizer)
    rng = random.Random(kind)
    ps = prompts(tokenizer, 4, seed=1)
    plain_engine = make_engine(model, tokenizer, k_max=0)
    plain = run(plain_engine, [request(p, 48, request_id=str(i)) for i, p in enumerate(ps)])
    preds = {
        "perfect": lambda out: out,
        "edited": lambda out: edited(out, rng, vocab),
        "renamed": lambda out: renamed(out, vocab),
        "garbage": lambda out: [rng.randrange(vocab) for _ in out],
        "empty": lambda out: [],
        "overlong": lambda out: out + out + [rng.randrange(vocab) for _ in range(50)],
        "prefix": lambda out: out[: len(out) // 2],
    }[kind]
    reqs = [request(p, 48, prediction=preds(plain[str(i)]), request_id=str(i)) for i, p in enumerate(ps)]
    engine = make_engine(model, tokenizer)
    got = run(engine, reqs)
    assert got == plain
    if kind == "perfect":  # the same batch, plain: one pass per token; with the prediction: a few passes
        assert engine.forward_passes < plain_engine.forward_passes / 2


def test_a_renamed_token_is_drafted_through_after_its_first_use(model, tokenizer, monkeypatch):
    """The aligner's rewrites (X -> Y learnt at the first use) take fewer passes than realigning at every use,
    and the output stays the plain one."""
    import foretell.engine.llm_engine as engine_module

    vocab = len(tokenizer)
    ps = prompts(tokenizer, 4, seed=1)
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, 48, request_id=str(i)) for i, p in enumerate(ps)])
    reqs = [request(p, 48, prediction=renamed(plain[str(i)], vocab), method="prediction", request_id=str(i))
            for i, p in enumerate(ps)]
    with_rewrites = make_engine(model, tokenizer)
    assert run(with_rewrites, reqs) == plain
    original = engine_module.make_proposer

    def without_rewrites(*args, **kwargs):
        proposer = original(*args, **kwargs)
        proposer.aligner.config = replace(proposer.aligner.config, learn_rewrites=False)
        return proposer

    monkeypatch.setattr(engine_module, "make_proposer", without_rewrites)
    without = make_engine(model, tokenizer)
    assert run(without, reqs) == plain
    assert with_rewrites.forward_passes < without.forward_passes


def test_concurrent_requests_join_and_leave(model, tokenizer):
    """Requests of different lengths arrive between steps and finish at different times."""
    vocab = len(tokenizer)
    rng = random.Random(7)
    ps = prompts(tokenizer, 6, seed=3)
    lengths = [5, 30, 12, 48, 1, 20]
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, n, request_id=str(i)) for i, (p, n) in enumerate(zip(ps, lengths))])
    engine = make_engine(model, tokenizer, max_num_seqs=3)
    got: dict[str, list[int]] = {str(i): [] for i in range(len(ps))}
    pending = [
        request(p, n, prediction=edited(plain[str(i)], rng, vocab) if i % 2 else plain[str(i)], request_id=str(i))
        for i, (p, n) in enumerate(zip(ps, lengths))
    ]
    steps = 0
    while pending or engine.has_unfinished():
        if pending and steps % 2 == 0:
            engine.add_request(pending.pop(0))
        for out in engine.step():
            got[out.request_id].extend(out.new_token_ids)
        steps += 1
    assert got == plain
    assert engine.pool.reserved_tokens == 0


def test_seeded_sampling_identical_with_prediction(model, tokenizer):
    sampling = SamplingParams(temperature=0.9, top_p=0.95, seed=1234)
    ps = prompts(tokenizer, 3, seed=5)
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, 40, sampling=sampling, request_id=str(i)) for i, p in enumerate(ps)])
    rng = random.Random(0)
    with_pred = run(
        make_engine(model, tokenizer),
        [request(p, 40, prediction=edited(plain[str(i)], rng, len(tokenizer)), sampling=sampling, request_id=str(i)) for i, p in enumerate(ps)],
    )
    assert with_pred == plain


def test_penalties_identical_with_prediction(model, tokenizer):
    sampling = SamplingParams(temperature=0.0, presence_penalty=0.5, frequency_penalty=0.7, repetition_penalty=1.3)
    ps = prompts(tokenizer, 2, seed=6)
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, 40, sampling=sampling, request_id=str(i)) for i, p in enumerate(ps)])
    got = run(make_engine(model, tokenizer), [request(p, 40, prediction=plain[str(i)], sampling=sampling, request_id=str(i)) for i, p in enumerate(ps)])
    assert got == plain


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_logit_bias_changes_the_output_and_stays_identical_with_prediction(model, tokenizer, temperature):
    ps = prompts(tokenizer, 2, seed=12)
    unbiased = SamplingParams(temperature=temperature, seed=7)
    free = run(make_engine(model, tokenizer, k_max=0), [request(p, 30, sampling=unbiased, request_id=str(i)) for i, p in enumerate(ps)])
    banned = sorted({free[str(i)][j] for i in range(2) for j in (0, 3)})
    sampling = SamplingParams(temperature=temperature, seed=7, logit_bias=tuple((t, -100.0) for t in banned))
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, 30, sampling=sampling, request_id=str(i)) for i, p in enumerate(ps)])
    for i in range(2):
        assert plain[str(i)] != free[str(i)]
        assert not set(banned) & set(plain[str(i)])
    for preds in ([free[str(i)] for i in range(2)], [plain[str(i)] for i in range(2)]):
        got = run(make_engine(model, tokenizer), [request(p, 30, prediction=preds[i], sampling=sampling, request_id=str(i)) for i, p in enumerate(ps)])
        assert got == plain


def test_logit_bias_outside_the_vocabulary_is_refused(model, tokenizer):
    engine = make_engine(model, tokenizer)
    vocab = engine.runner.vocab_size
    with pytest.raises(ConfigError) as err:
        engine.add_request(request(prompts(tokenizer, 1)[0], 5, sampling=SamplingParams(logit_bias=((vocab, 1.0),))))
    assert err.value.field == "logit_bias"


def test_each_draft_is_priced_with_the_tokens_later_requests_will_add(model, tokenizer, monkeypatch):
    """In a pass of three decoding requests, the first one's draft is priced as the 2nd and 3rd tokens are
    already there (each later request adds at least its pending token and yields at least one): a one-token
    draft costs what the 4th token of the pass costs, not the 2nd."""
    from foretell.core.policy import DraftPolicy

    seen = []
    decide = DraftPolicy.decide
    monkeypatch.setattr(DraftPolicy, "decide", lambda self, room, batch_tokens=0, batch_expected=0.0, context=0: (
        seen.append((batch_tokens, batch_expected)), decide(self, room, batch_tokens, batch_expected, context))[1])
    engine = make_engine(model, tokenizer, k_max=0)
    for i, p in enumerate(prompts(tokenizer, 3, seed=13)):
        engine.add_request(request(p, 6, request_id=str(i), ignore_eos=True))
    while engine.has_unfinished():
        engine.step()
    decode_steps = [seen[i : i + 3] for i in range(0, len(seen) - 2, 3) if seen[i][0] == 2]
    assert decode_steps  # passes where all three decode
    for step in decode_steps:
        assert step == [(2, 2.0), (2, 2.0), (2, 2.0)]  # 0 + 2 later, 1 + 1 later, 2 + 0 later


def _text_and_tokens(engine, req):
    outs = engine.generate([req])[req.request_id]
    return "".join(o.new_text for o in outs), [t for o in outs for t in o.new_token_ids], outs[-1]


def test_stop_strings_and_max_tokens_cut_like_plain_decoding(model, tokenizer):
    p = prompts(tokenizer, 1, seed=9)[0]
    full_text, full_tokens, _ = _text_and_tokens(make_engine(model, tokenizer, k_max=0), request(p, 60, ignore_eos=True, request_id="a"))
    assert len(full_tokens) == 60
    stop = full_text[len(full_text) // 2 : len(full_text) // 2 + 2]
    assert stop
    for k_max in (0, 32):
        pred = full_tokens if k_max else None
        text, tokens, last = _text_and_tokens(
            make_engine(model, tokenizer, k_max=k_max), request(p, 60, prediction=pred, stop=(stop,), ignore_eos=True, request_id="b")
        )
        assert text == full_text[: full_text.index(stop)]
        assert last.finish_reason == "stop"
        assert tokens == full_tokens[: len(tokens)]
        assert last.stats.completion_tokens == len(tokens)
        assert last.stats.accepted_prediction_tokens <= last.stats.completion_tokens
        text, tokens, last = _text_and_tokens(
            make_engine(model, tokenizer, k_max=k_max), request(p, 17, prediction=pred, ignore_eos=True, request_id="c")
        )
        assert tokens == full_tokens[:17] and last.finish_reason == "length"
        assert last.stats.completion_tokens == 17
        if pred:
            stats = last.stats
            assert stats.accepted_prediction_tokens + stats.rejected_prediction_tokens == len(pred)


def test_usage_counts_for_perfect_prediction(model, tokenizer):
    p = prompts(tokenizer, 1, seed=11)[0]
    _, plain, _ = _text_and_tokens(make_engine(model, tokenizer, k_max=0), request(p, 50, ignore_eos=True, request_id="a"))
    _, tokens, last = _text_and_tokens(make_engine(model, tokenizer), request(p, 50, prediction=plain, ignore_eos=True, request_id="b"))
    s = last.stats
    assert tokens == plain
    assert s.completion_tokens == 50
    assert s.accepted_prediction_tokens == 50  # every token appeared in the prediction, bonus tokens too
    assert s.rejected_prediction_tokens == 0


def test_accepted_prediction_tokens_count_the_output_not_who_drafted_it(model, tokenizer):
    """OpenAI's meaning: prediction tokens that appeared in the completion (bonus tokens and n-gram drafts
    included), so the prediction-only and the auto run (n-gram lookup beside it) give the same counts."""
    p = prompts(tokenizer, 1, seed=12)[0]
    _, plain, _ = _text_and_tokens(make_engine(model, tokenizer, k_max=0), request(p, 40, ignore_eos=True, request_id="a"))
    pred = plain[:10] + [7, 8, 9] + plain[13:] + [5, 6]  # three tokens replaced, two more at the end
    matched = sum(b.size for b in difflib.SequenceMatcher(None, pred, plain, autojunk=False).get_matching_blocks())
    assert matched >= 35
    counts = {}
    for method in ("prediction", "auto"):
        _, got, last = _text_and_tokens(make_engine(model, tokenizer), request(p, 40, prediction=pred, method=method, ignore_eos=True, request_id="b"))
        assert got == plain
        counts[method] = (last.stats.accepted_prediction_tokens, last.stats.rejected_prediction_tokens)
    assert counts["prediction"] == counts["auto"] == (matched, len(pred) - matched)


def test_cancel_frees_kv(model, tokenizer):
    """With the prefix cache on (the default): a cancelled request's KV is freed, not kept as a cached prefix,
    while a finished one's is kept."""
    engine = make_engine(model, tokenizer)
    ps = prompts(tokenizer, 4, seed=12)
    for i, p in enumerate(ps):
        engine.add_request(request(p, 200 if i else 3, ignore_eos=True, request_id=str(i)))
    while engine.has_unfinished() and "0" in {s.id for s in engine.running + list(engine.waiting)}:
        engine.step()
    assert len(engine.pool.cache) == 1  # request 0 finished and is cached
    cached = engine.pool.cached_tokens
    assert engine.pool.reserved_tokens > 0
    assert engine.abort("1")
    assert len(engine.running) == 2
    engine.abort("2")
    engine.abort("3")
    assert not engine.has_unfinished()
    assert engine.pool.reserved_tokens == 0 and len(engine.pool.cache) == 1
    assert engine.pool.used_tokens == cached


def test_prefix_cache_reuses_prompt_and_stays_exact(model, tokenizer):
    engine = make_engine(model, tokenizer)
    base = tokenizer.encode("class Snake:\n    def __init__(self, width, height):\n        self.body = []\n")
    a = engine.generate([request(base + tokenizer.encode("# one"), 20, request_id="a")])["a"]
    b = engine.generate([request(base + tokenizer.encode("# two"), 20, request_id="b")])["b"]
    assert a[-1].stats.cached_tokens == 0
    assert b[-1].stats.cached_tokens >= len(base) - 2
    fresh = make_engine(model, tokenizer, prefix_cache=False).generate([request(base + tokenizer.encode("# two"), 20, request_id="b")])["b"]
    assert [t for o in b for t in o.new_token_ids] == [t for o in fresh for t in o.new_token_ids]


def test_chunked_prefill_is_exact(model, tokenizer):
    long_prompt = tokenizer.encode("def add(a, b):\n    return a + b\n" * 12)
    a = run(make_engine(model, tokenizer, prefill_chunk=16, k_max=0), [request(long_prompt, 20, request_id="x")])
    b = run(make_engine(model, tokenizer, prefill_chunk=4096, k_max=0), [request(long_prompt, 20, request_id="x")])
    assert a == b


def test_limits_and_queue(model, tokenizer):
    engine = make_engine(model, tokenizer, max_model_len=64, max_num_seqs=1, max_queue=1)
    with pytest.raises(RequestTooLongError) as err:
        engine.add_request(request([1] * 70, 5))
    assert err.value.field == "messages"
    with pytest.raises(RequestTooLongError) as err:
        engine.add_request(request([1] * 10, 60))
    assert err.value.field == "max_tokens"
    engine.add_request(request([1] * 10, 5))
    engine.add_request(request([1] * 10, 5))
    with pytest.raises(QueueFullError):
        engine.add_request(request([1] * 10, 5))


def test_prepacked_cpu_linears_stay_lossless(tokenizer):
    """The real-model path swaps fp32 Linear layers for oneDNN pre-packed ones; speculation stays exact."""
    from foretell.engine.runner import prepack_cpu_linears

    model = make_tiny_model(seed=3)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    ps = prompts(tokenizer, 3, seed=13)
    reference = {str(i): hf_greedy(model, p, 40, eos) for i, p in enumerate(ps)}
    if prepack_cpu_linears(model) == 0:
        pytest.skip("oneDNN not available")
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, 40, request_id=str(i)) for i, p in enumerate(ps)])
    rng = random.Random(3)
    got = run(make_engine(model, tokenizer), [request(p, 40, prediction=edited(plain[str(i)], rng, len(tokenizer)), request_id=str(i)) for i, p in enumerate(ps)])
    assert got == plain == reference


def test_row_dispatch_linears_pick_a_kernel_per_call_size_and_stay_lossless(tokenizer):
    """fp32 CPU linears take MKL or oneDNN packed by the call's row count, as their model's kernel plan says
    (measured with whole passes at start-up): each call runs the kernel chosen for its size, both compute the
    same layer, and speculation stays exact."""
    import torch
    from foretell.engine.runner import KernelPlan, RowDispatchLinear, row_dispatch_cpu_linears

    if not torch.backends.mkldnn.is_available():
        pytest.skip("oneDNN not available")
    torch.manual_seed(0)
    plan = KernelPlan(sizes=(1, 2, 4, 8, 16, 32), packed_at=frozenset({4, 8, 16}))
    layer = RowDispatchLinear(torch.nn.Linear(32, 48), plan)
    calls = []
    layer.dense.register_forward_hook(lambda *a: calls.append("dense"))

    class Spy(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            calls.append("packed")
            return self.inner(x)

    layer.packed = Spy(layer.packed)
    for rows in (1, 3, 4, 7, 20, 40, 600):
        x = torch.randn(1, rows, 32)
        with torch.no_grad():
            torch.testing.assert_close(layer(x), layer.dense(x), rtol=1e-5, atol=1e-5)
    # (the assert_close reference call adds one "dense" per size)
    assert calls[::2] == ["dense", "dense", "packed", "packed", "packed", "dense", "dense"]
    plan.by_shape = {(32, 48): frozenset({1, 8}), (48, 32): frozenset()}  # a plan per layer shape
    calls.clear()
    with torch.no_grad():
        for rows in (1, 4, 8):
            layer(torch.randn(1, rows, 32))
    assert calls == ["packed", "dense", "packed"]
    plan.force, plan.timings = True, {}  # the cost measurement times every call on one kernel
    calls.clear()
    with torch.no_grad():
        layer(torch.randn(1, 1, 32))
    assert calls == ["packed"] and plan.timings[(32, 48)] > 0.0  # and each layer shape's calls
    plan.force, plan.timings, plan.by_shape = None, None, {}

    model = make_tiny_model(seed=3)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    ps = prompts(tokenizer, 3, seed=13)
    reference = {str(i): hf_greedy(model, p, 40, eos) for i, p in enumerate(ps)}
    plan = row_dispatch_cpu_linears(model)
    assert plan is not None and plan.packed(1) is False and plan.packed(4) is True  # the default plan
    assert plan.packed(256) is True and plan.packed(407) is False  # beyond the measured sizes: MKL
    layers = [m for m in model.modules() if isinstance(m, RowDispatchLinear)]
    assert layers and all(m.plan is plan for m in layers)  # one plan per model
    assert isinstance(model.get_output_embeddings(), RowDispatchLinear)  # the output head has both kernels too
    plan.sizes, plan.packed_at = (1, 2, 3, 5), frozenset({2, 5})  # passes of 1-3 rows switch kernels often
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, 40, request_id=str(i)) for i, p in enumerate(ps)])
    rng = random.Random(3)
    got = run(make_engine(model, tokenizer), [request(p, 40, prediction=edited(plain[str(i)], rng, len(tokenizer)), request_id=str(i)) for i, p in enumerate(ps)])
    assert got == plain == reference


def test_row_dispatch_with_foretells_cpu_gemm_uses_the_dense_weight_and_stays_lossless(tokenizer):
    """Where foretell's CPU GEMM builds, it is the plan's alternative to MKL: computed on the layer's own weight
    (no oneDNN copy), and greedy outputs with edited predictions stay those of plain decoding while passes
    of different sizes switch kernels."""
    from torch.utils.mkldnn import MkldnnLinear

    from foretell.engine import cpu_gemm
    from foretell.engine.runner import RowDispatchLinear, row_dispatch_cpu_linears

    gemm = cpu_gemm.load()
    if gemm is None:
        pytest.skip("foretell's CPU GEMM cannot be built here")
    model = make_tiny_model(seed=4)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    ps = prompts(tokenizer, 3, seed=17)
    reference = {str(i): hf_greedy(model, p, 40, eos) for i, p in enumerate(ps)}
    plan = row_dispatch_cpu_linears(model, own_gemm=True)
    assert plan is not None and plan.kernel == "foretell" and "4: foretell" in plan.describe()
    layers = [m for m in model.modules() if isinstance(m, RowDispatchLinear)]
    assert layers and not any(isinstance(m, MkldnnLinear) for m in model.modules())
    layer = layers[0]
    x = torch.randn(1, 6, layer.shape[0])
    plan.force = True
    with torch.no_grad():
        torch.testing.assert_close(layer(x), layer.dense(x), rtol=1e-5, atol=1e-5)
    plan.force = None
    plan.sizes, plan.packed_at = (1, 2, 3, 5), frozenset({2, 5})  # passes of 1-3 rows switch kernels often
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, 40, request_id=str(i)) for i, p in enumerate(ps)])
    rng = random.Random(5)
    got = run(make_engine(model, tokenizer), [request(p, 40, prediction=edited(plain[str(i)], rng, len(tokenizer)), request_id=str(i)) for i, p in enumerate(ps)])
    assert got == plain == reference


@pytest.mark.parametrize("lean", [False, True])
def test_row_dispatch_reads_bf16_copies_where_weights_are_exact_and_stays_lossless(tokenizer, lean):
    """A model whose fp32 weights are all exactly bf16 (the packaged models) gets bf16 copies of its linear
    layers for foretell's kernel (half the bytes); MKL reads the fp32 weights, or with ``lean`` the bf16 ones
    widened per call (no fp32 copy kept). The output head and the input embedding keep only bf16 copies (one,
    shared, where they are tied). Greedy outputs, with edited predictions while passes switch kernels, equal
    HF's on the fp32 model."""
    from foretell.engine import cpu_gemm
    from foretell.engine.runner import RowDispatchLinear, row_dispatch_cpu_linears

    if cpu_gemm.load() is None:
        pytest.skip("foretell's CPU GEMM cannot be built here")
    model = make_tiny_model(seed=6)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.bfloat16().float())  # fp32 weights that are exactly bf16, as a converted checkpoint's
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    ps = prompts(tokenizer, 3, seed=19)
    reference = {str(i): hf_greedy(model, p, 40, eos) for i, p in enumerate(ps)}
    fp32_bytes = sum(p.numel() * 4 for p in model.parameters())
    embedding_elems = model.get_input_embeddings().weight.numel()
    plan = row_dispatch_cpu_linears(model, own_gemm=True, lean=lean)
    assert plan is not None and plan.kernel == ("foretell+bf16" if lean else "foretell+bf16+fp32")
    head = model.get_output_embeddings()
    layers = [m for m in model.modules() if isinstance(m, RowDispatchLinear)]
    assert head in layers and head.weight.dtype == torch.bfloat16
    assert all(m.packed.keywords["weight"].dtype == torch.bfloat16 for m in layers)  # the kernel's copy
    body = [m for m in layers if m is not head]
    assert all(m.weight.dtype == (torch.bfloat16 if lean else torch.float32) for m in body)  # what MKL reads
    assert model.get_input_embeddings().weight.dtype == torch.bfloat16
    assert next(model.parameters()).dtype == torch.float32  # what the KV cache's dtype is read from
    if lean:  # one copy of each weight, in bf16
        narrowed = sum(m.weight.numel() for m in layers) + embedding_elems
        tensors = [*model.parameters(), *model.buffers()]
        assert sum(p.numel() * p.element_size() for p in tensors if p.is_floating_point()) <= fp32_bytes - 2 * narrowed + 4096
    plan.sizes, plan.packed_at = (1, 2, 3, 5), frozenset({2, 5})  # 1, 3-4 and >= 6 rows (prefill) on MKL
    plain = run(make_engine(model, tokenizer, k_max=0), [request(p, 40, request_id=str(i)) for i, p in enumerate(ps)])
    rng = random.Random(7)
    got = run(make_engine(model, tokenizer), [request(p, 40, prediction=edited(plain[str(i)], rng, len(tokenizer)), request_id=str(i)) for i, p in enumerate(ps)])
    assert got == plain == reference

    tied = make_tiny_model(seed=6)
    tied.lm_head.weight = tied.get_input_embeddings().weight
    with torch.no_grad():
        for p in tied.parameters():
            p.copy_(p.bfloat16().float())
    tied_reference = hf_greedy(tied, ps[0], 40, eos)
    row_dispatch_cpu_linears(tied, own_gemm=True, lean=lean)
    head = tied.get_output_embeddings()
    assert head.weight.dtype == torch.bfloat16 and head.weight is tied.get_input_embeddings().weight
    assert run(make_engine(tied, tokenizer, k_max=0), [request(ps[0], 40, request_id="t")])["t"] == tied_reference


def test_row_dispatch_on_a_bf16_model_runs_foretells_kernel_on_the_same_weights(tokenizer):
    """A bf16 model on the CPU (what ``--dtype auto`` picks on CPUs with native bf16): each linear layer runs the
    library's bf16 GEMM or foretell's kernel (VDPBF16PS where the CPU has AVX512-BF16) on the layer's own
    weights, no copy, by the plan; the kernel's logits agree with the library's to bf16 rounding, and the engine
    decodes through the plan. An fp16 model is left alone."""
    import copy

    from foretell.engine import cpu_gemm
    from foretell.engine.runner import RowDispatchLinear, row_dispatch_cpu_linears

    gemm = cpu_gemm.load()
    if gemm is None:
        pytest.skip("foretell's CPU GEMM cannot be built here")
    model = make_tiny_model(seed=8, dtype=torch.bfloat16)
    original = copy.deepcopy(model)
    plan = row_dispatch_cpu_linears(model, own_gemm=True)
    assert plan is not None and plan.kernel == ("foretell+amx" if gemm.amx else "foretell+bf16dot" if gemm.bf16dot
                                                else "foretell+bf16widened")
    layers = [m for m in model.modules() if isinstance(m, RowDispatchLinear)]
    assert model.get_output_embeddings() in layers
    assert {id(m) for m in model.modules() if type(m) is torch.nn.Linear} == {id(m.dense) for m in layers}
    assert all(m.packed.keywords["weight"] is m.dense.weight for m in layers)  # the kernel reads the same tensor
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    ids = torch.tensor([tokenizer.encode("def add(a, b): return a + b")])
    with torch.no_grad():
        reference = original(ids).logits.float()
        for force in (True, False):
            plan.force = force
            logits = model(ids).logits.float()
            torch.testing.assert_close(logits, reference, rtol=0.05, atol=0.05 * reference.abs().max().item())
    plan.force = None
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    out = run(make_engine(model, tokenizer, k_max=0), [request(ids[0].tolist(), 12, request_id="a")])["a"]
    assert len(out) == 12 or out[-1] == eos
    assert row_dispatch_cpu_linears(make_tiny_model(seed=8, dtype=torch.float16), own_gemm=True) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_the_heads_logits_go_into_one_kept_buffer_with_the_heads_own_values(dtype):
    """Outside exact mode, a CPU output head with two kernels (:class:`RowDispatchLinear`, the default where
    foretell's kernel builds) writes the logits of the engine's passes (``reuse_logits``) into a buffer kept across
    passes: every pass's logits are a fresh pass's bit for bit (each kernel forced; fp32 weights that are exactly
    bf16, as the packaged models', and bf16), reusing passes share one buffer, a pass that does not reuse gets
    memory of its own, and the model's state keeps its keys."""
    from foretell.engine import cpu_gemm
    from foretell.engine.runner import RowDispatchLinear, row_dispatch_cpu_linears

    if cpu_gemm.load() is None:
        pytest.skip("foretell's CPU GEMM cannot be built here")
    model = make_tiny_model(seed=9, dtype=dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.bfloat16().to(dtype))
    assert row_dispatch_cpu_linears(model, own_gemm=True) is not None
    keys = set(model.state_dict())
    runner = ModelRunner(model)
    head = model.get_output_embeddings()
    assert isinstance(head, RowDispatchLinear) and set(model.state_dict()) == keys
    rng = random.Random(2)
    prompt = [rng.randrange(runner.vocab_size) for _ in range(20)]
    follow = [rng.randrange(runner.vocab_size) for _ in range(40)]
    kv = SeqKV(runner.kv_shape, 64, 4096)
    runner.forward([Segment(kv, prompt[:-1], num_logits=0)])
    kv.length = len(prompt) - 1
    for force in (True, False):
        head.plan.force = force
        pointers = set()
        for k in (39, 6, 0, 2):  # the largest first: the buffer grows to it once
            segment = [prompt[-1]] + follow[:k]
            fresh = runner.forward([Segment(kv, segment, num_logits=k + 1)])[0]
            kept = runner.forward([Segment(kv, segment, num_logits=k + 1)], reuse_logits=True)[0]
            assert kept.dtype == torch.float32 and torch.equal(kept, fresh)
            assert fresh.data_ptr() not in pointers
            pointers.add(kept.data_ptr())
        assert len(pointers) == 1  # one buffer for every reusing pass
    head.plan.force = None
    assert not head.keep_logits  # set for the engine's passes only


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_logits_runs_the_layers_gemm_into_the_buffer(dtype, bias):
    """``linear_logits`` gives ``layer(x).float()`` bit for bit, into the caller's float32 buffer, for row counts
    from a GEMV to a long pass; a layer it cannot run itself is called and copied in."""
    from foretell.engine.runner import _Scratch, linear_logits

    torch.manual_seed(0)
    layer = torch.nn.Linear(96, 300, bias=bias).to(dtype)
    out, scratch = torch.empty(128 * 300), _Scratch()
    for rows in (1, 2, 5, 33, 128):
        x = torch.randn(rows, 96).to(dtype)
        with torch.no_grad():
            y = linear_logits(layer, x, out, scratch)
            assert y.data_ptr() == out.data_ptr() and torch.equal(y, layer(x).float())
    other = torch.nn.Sequential(layer)  # not a plain Linear: called, then copied
    x = torch.randn(3, 96).to(dtype)
    with torch.no_grad():
        assert torch.equal(linear_logits(other, x, out, scratch), layer(x).float())
