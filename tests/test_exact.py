"""Exact mode: a position's logits are bit-identical however the pass is composed, in bf16 too.

bf16 GEMMs over one row (GEMV) and over many round differently, and SDPA blocks its reductions differently
for different numbers of queries, so without exact mode these comparisons fail on CPUs (checked when the
mode was built: the default runner differs from one-token passes at every k tested). The model is a small
random bf16 Qwen2 whose MLP is wide enough (K = 2048) for the GEMM and GEMV paths to differ.
"""

from __future__ import annotations

import random
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.kv_cache import SeqKV
from foretell.engine.llm_engine import LLMEngine
from foretell.engine import cpu_gemm
from foretell.engine.runner import ExactKernelLinear, ModelRunner, Segment
from foretell.testing import make_tiny_model, make_tiny_tokenizer

GREEDY = SamplingParams(temperature=0.0)


def bf16_model(dtype=torch.bfloat16):
    """Flat random logits (small init scale): near-ties are common, so a rounding difference flips greedy
    choices (without exact mode, 2 of the 3 prompts below decode differently with a perfect prediction)."""
    return make_tiny_model(dtype=dtype, seed=3, hidden_size=256, intermediate_size=2048, num_layers=2,
                           init_scale=0.02)


@pytest.fixture(scope="module", params=[torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"])
def model(request):
    return bf16_model(request.param)


@pytest.fixture(scope="module", params=["kernel", "padded"])
def runner(model, request):
    """Exact mode's two routes: foretell's row-invariant CPU kernel for every row that needs logits (where it
    builds), and, without it, padded one-row calls on oneDNN's GEMM."""
    exact_model = bf16_model(model.dtype)
    if request.param == "padded":
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cpu_gemm, "load", lambda: None)
            built = ModelRunner(exact_model, exact=True)
        assert not built.exact_kernel
        return built
    if cpu_gemm.load() is None:
        pytest.skip("foretell's CPU kernel does not build here")
    built = ModelRunner(exact_model, exact=True)
    assert built.exact_kernel and any(isinstance(m, ExactKernelLinear) for m in built.model.modules())
    return built


def new_kv(runner) -> SeqKV:
    return SeqKV(runner.kv_shape, 64, 4096)


def prefill(runner, kv: SeqKV, tokens: list[int], chunk: int) -> None:
    for i in range(0, len(tokens), chunk):
        part = tokens[i : i + chunk]
        runner.forward([Segment(kv, part, num_logits=0)])
        kv.length += len(part)


def one_token_logits(runner, prompt: list[int], follow: list[int]) -> torch.Tensor:
    """Logits after the prompt and after each of ``follow``'s tokens, one token per pass (a decode)."""
    kv = new_kv(runner)
    prefill(runner, kv, prompt[:-1], 16)
    rows = []
    for token in [prompt[-1]] + follow:
        rows.append(runner.forward([Segment(kv, [token], num_logits=1)])[0])
        kv.length += 1
    return torch.cat(rows)


@pytest.fixture(scope="module")
def data(runner):
    rng = random.Random(0)
    prompt = [rng.randrange(runner.vocab_size) for _ in range(41)]
    follow = [rng.randrange(runner.vocab_size) for _ in range(128)]
    return prompt, follow, one_token_logits(runner, prompt, follow)


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh", "reused"])
@pytest.mark.parametrize("k", [1, 2, 3, 7, 16, 33, 64, 128])
def test_verify_pass_of_k_tokens_matches_one_token_passes(runner, data, k, reuse):
    prompt, follow, reference = data
    kv = new_kv(runner)
    prefill(runner, kv, prompt[:-1], 16)
    logits = runner.forward([Segment(kv, [prompt[-1]] + follow[:k], num_logits=k + 1)], reuse_logits=reuse)[0]
    assert torch.equal(logits, reference[: k + 1])


def test_passes_that_reuse_their_logits_share_one_buffer_with_the_same_values(runner, data):
    """The engine's passes (``reuse_logits``) write the head's logits into one kept buffer (no fresh pages for
    every long pass); the values are the fresh pass's, and a pass that does not reuse gets its own memory.
    (An fp16 head keeps the kernel's fp16 result: no buffer.)"""
    if not runner.exact_kernel or next(runner.model.parameters()).dtype == torch.float16:
        pytest.skip("the padded route and fp16 models have no kept head buffer")
    prompt, follow, reference = data
    kv = new_kv(runner)
    prefill(runner, kv, prompt[:-1], 16)
    first = runner.forward([Segment(kv, [prompt[-1]] + follow[:9], num_logits=10)], reuse_logits=True)[0]
    assert torch.equal(first, reference[:10])
    pointer = first.data_ptr()
    second = runner.forward([Segment(kv, [prompt[-1]] + follow[:5], num_logits=6)], reuse_logits=True)[0]
    assert second.data_ptr() == pointer and torch.equal(second, reference[:6])
    fresh = runner.forward([Segment(kv, [prompt[-1]] + follow[:5], num_logits=6)])[0]
    assert fresh.data_ptr() != pointer and torch.equal(fresh, reference[:6])


def test_packed_neighbours_and_the_last_prompt_chunk_change_no_bit(runner, data):
    prompt, follow, reference = data
    rng = random.Random(1)
    other = [rng.randrange(runner.vocab_size) for _ in range(30)]
    kv, kv_other = new_kv(runner), new_kv(runner)
    prefill(runner, kv, prompt[:32], 16)  # the chunks the reference computed: [0, 16), [16, 32)
    # the prompt's last chunk [32, 41) and 20 draft tokens in one pass, beside another request's prompt chunk
    _, logits = runner.forward([Segment(kv_other, other, num_logits=0),
                                Segment(kv, prompt[32:] + follow[:20], num_logits=21)])
    assert torch.equal(logits, reference[:21])
    kv.length = len(prompt) + 20
    # then a decode step beside the other request's verify pass
    _, logits = runner.forward([Segment(kv_other, [5] + follow[:9], num_logits=10),
                                Segment(kv, [follow[20]], num_logits=1)])
    assert torch.equal(logits, reference[21:22])


def test_default_runner_is_not_exact_here(model, data):
    if model.dtype != torch.bfloat16:
        pytest.skip("shown for bf16")
    """What exact mode fixes: the default runner's verify pass differs from one-token passes on this model
    (if some machine's kernels were invariant anyway, there is nothing to show, and the test skips)."""
    prompt, follow, _ = data
    plain = ModelRunner(bf16_model())
    reference = one_token_logits(plain, prompt, follow)
    kv = new_kv(plain)
    prefill(plain, kv, prompt[:-1], 16)
    logits = plain.forward([Segment(kv, [prompt[-1]] + follow, num_logits=129)])[0]
    if torch.equal(logits, reference):
        pytest.skip("this machine's kernels are batch-invariant without exact mode")
    assert not torch.equal(logits, reference)


def make_engine(runner, tokenizer, **overrides) -> LLMEngine:
    cfg = dict(max_num_seqs=8, kv_budget_tokens=16384, prefill_chunk=32, k_max=64, measure_cost_curve=False,
               exact=True)
    cfg.update(overrides)
    return LLMEngine(runner, tokenizer, EngineConfig(**cfg))


def run(engine, requests, stats=None) -> dict[str, list[int]]:
    outs = engine.generate(requests)
    if stats is not None:
        stats.update({rid: chunks[-1].stats for rid, chunks in outs.items()})
    return {rid: [t for o in chunks for t in o.new_token_ids] for rid, chunks in outs.items()}


def request(prompt, max_tokens, prediction=None, method="auto") -> GenerationRequest:
    spec = SpeculationParams(prediction=None if prediction is None else tuple(prediction), method=method)
    return GenerationRequest(prompt_ids=list(prompt), max_tokens=max_tokens, sampling=GREEDY, speculation=spec,
                             ignore_eos=True)


def test_bf16_greedy_output_identical_with_any_prediction_batched(runner):
    """Perfect, edited, garbage, empty and over-long predictions, all in one batch, in bf16: every output
    equals plain decoding (n-gram lookup off) of the same prompt run alone."""
    tokenizer = make_tiny_tokenizer()
    rng = random.Random(2)
    prompts = [[rng.randrange(runner.vocab_size) for _ in range(n)] for n in (12, 40, 75)]
    engine = make_engine(runner, tokenizer)
    plain = {i: run(engine, [r := request(p, 60, method="none")])[r.request_id] for i, p in enumerate(prompts)}
    reqs, expected = [], []
    for i, p in enumerate(prompts):
        out = plain[i]
        edited = out[:20] + [7, 8, 9] + out[25:]
        garbage = [rng.randrange(runner.vocab_size) for _ in range(60)]
        for pred in (out, edited, garbage, [], out + out):
            reqs.append(request(p, 60, prediction=pred))
            expected.append(out)
        reqs.append(request(p, 60, method="ngram"))
        expected.append(out)
    stats = {}
    got = run(engine, reqs, stats)
    assert [got[r.request_id] for r in reqs] == expected
    perfect = [stats[r.request_id] for r in reqs[::6]]
    assert all(s.forward_passes < 15 for s in perfect)  # the prediction was used: 60 tokens in few passes


def test_tiled_keys_change_no_token_through_rollbacks_batches_and_the_prefix_cache(runner, monkeypatch):
    """fp32 caches on foretell's attention keep each layer's keys transposed between passes (SeqKV.tiles), so a pass
    transposes only its new keys. Rejected drafts (rollbacks), prefix-cache hits on shorter and repeated prompts,
    batches: every output equals that of the same engine without tiled keys, and the tiles were kept."""
    if runner.kv_shape.key_tile == 0:
        pytest.skip("tiled keys are kept for fp32 caches on foretell's CPU attention only")
    tokenizer = make_tiny_tokenizer()
    rng = random.Random(9)
    prompts = [[rng.randrange(runner.vocab_size) for _ in range(n)] for n in (20, 45, 90)]
    tiled = make_engine(runner, tokenizer)
    with monkeypatch.context() as patch:
        patch.setattr(runner, "kv_shape", replace(runner.kv_shape, key_tile=0))
        untiled = make_engine(runner, tokenizer)
    assert untiled.pool.shape.key_tile == 0 and tiled.pool.shape.key_tile == runner.kv_shape.key_tile

    def batch(p, out):
        edited = out[:9] + [5, 6] + out[14:]
        return [request(p, 40, method="none"), request(p, 40, prediction=out), request(p, 40, prediction=edited),
                request(p[:-4] + [3], 40, prediction=edited[::-1]), request(p, 40, method="ngram")]

    for p in prompts:
        out = run(untiled, [r := request(p, 40, method="none")])[r.request_id]
        want = None
        for engine in (untiled, tiled):  # twice each: the second round takes prefixes from the cache
            for _ in range(2):
                reqs = batch(p, out)
                got = run(engine, reqs)
                want = want or [got[r.request_id] for r in reqs]
                assert [got[r.request_id] for r in reqs] == want
        assert want[:3] == [out] * 3
    kept = [e.kv for e in tiled.pool.cache.values()]
    assert kept and all(kv.tiles and 0 < kv.tiles_valid <= kv.length for kv in kept)
    assert all(not kv.tiles for kv in (e.kv for e in untiled.pool.cache.values()))


def test_exact_engine_needs_an_exact_runner(model):
    model = make_tiny_model()
    with pytest.raises(ValueError, match="exact"):
        LLMEngine(ModelRunner(model), make_tiny_tokenizer(), EngineConfig(exact=True, measure_cost_curve=False))


def test_prefix_cache_reuses_whole_prompt_chunks_only_in_exact_mode(runner):
    from foretell.engine.kv_cache import KVPool

    pool = KVPool(runner.kv_shape, 100000, 4096, reuse_align=32)
    kv, _ = pool.allocate("a", 400, list(range(100)))
    kv.length = 150
    pool.release("a", kv, list(range(150)), prompt_len=100)  # reusable: the chunks before token 99 -> 96
    assert pool.allocate("b", 400, list(range(150)) + [1])[1] == 96
    assert pool.allocate("c", 400, list(range(50)) + [7])[1] == 32
    # the entry's own prompt (or one that differs only in its last token): a fresh request would compute every
    # position before that token in the chunks [0, 32) ... [96, 99) again, so all of them are reused
    assert pool.allocate("same", 400, list(range(100)))[1] == 99
    assert pool.allocate("same but the last", 400, list(range(99)) + [5])[1] == 99
    assert pool.allocate("one longer", 400, list(range(101)))[1] == 96
    plain = KVPool(runner.kv_shape, 100000, 4096)
    kv, _ = plain.allocate("a", 400, list(range(100)))
    kv.length = 150
    plain.release("a", kv, list(range(150)), prompt_len=100)
    assert plain.allocate("b", 400, list(range(150)) + [1])[1] == 150


def test_prefix_cache_reuses_a_last_prompt_chunk_computed_on_the_kernel(runner):
    """With ``kernel_rows`` a prompt's last chunk of at most that many rows (before its last token) runs on the
    kernel, as decode steps do: a new prompt whose own last chunk runs on the kernel may reuse any prefix of
    what the kernel computed; whole chunks on the library GEMM stay reusable as before; what a prompt computes
    on the library GEMM in a last chunk of its own bounds is reused only by the same prompt."""
    from foretell.engine.kv_cache import KVPool

    pool = KVPool(runner.kv_shape, 100000, 4096, reuse_align=32, kernel_rows=8)
    assert [pool.kernel_start(n) for n in (1, 9, 10, 33, 40, 41, 60)] == [0, 0, 9, 32, 32, 32, 59]
    kv, _ = pool.allocate("a", 400, list(range(40)))  # chunk [0, 32) on the library, [32, 39) on the kernel
    kv.length = 60
    pool.release("a", kv, list(range(60)), prompt_len=40)
    assert pool.allocate("same", 400, list(range(40)))[1] == 39  # before: 32
    assert pool.allocate("shorter", 400, list(range(38)) + [7])[1] == 38
    assert pool.allocate("into the output", 400, list(range(50)) + [7, 8])[1] == 32  # its last chunk: library
    assert pool.allocate("one chunk", 400, list(range(8)) + [7])[1] == 0  # [0, 32) was the library's

    kv, _ = pool.allocate("b", 400, [5] * 60)  # a last chunk [32, 59) on the library GEMM: not reusable
    kv.length = 60
    pool.release("b", kv, [5] * 60, prompt_len=60)
    assert pool.allocate("c", 400, [5] * 38 + [7])[1] == 32
    assert pool.allocate("the same prompt", 400, [5] * 60)[1] == 59  # its last chunk has the same bounds again

    every = KVPool(runner.kv_shape, 100000, 4096, reuse_align=32, kernel_rows=32)  # every chunk on the kernel
    kv, _ = every.allocate("a", 400, list(range(100)))
    kv.length = 120
    every.release("a", kv, list(range(120)), prompt_len=100)
    assert every.allocate("b", 400, list(range(110)) + [3])[1] == 110
    assert every.allocate("c", 400, list(range(20)) + [3])[1] == 20


def test_a_prompt_on_the_kernel_gives_the_bits_of_one_token_passes_whatever_its_chunks(runner, data):
    """A prompt chunk marked ``prompt_on_kernel`` is computed row by row on the kernel: its keys/values and the
    logits after it are those of one-token passes over the prompt, however the prompt is cut, alone or with the
    first draft in the same pass; no row reaches the library GEMM."""
    if not runner.exact_kernel:
        pytest.skip("the padded route has no kernel")
    prompt, follow, _ = data
    kv = new_kv(runner)
    rows = []
    for token in prompt + follow[:8]:
        rows.append(runner.forward([Segment(kv, [token], num_logits=1)])[0])
        kv.length += 1
    reference, keys = torch.cat(rows[len(prompt) - 1 :]), kv.keys[0][:, : len(prompt)].clone()
    layer = next(m for m in runner.model.modules() if isinstance(m, ExactKernelLinear) and m.dense is not None)
    dense_rows = []
    hook = layer.dense.register_forward_hook(lambda m, a, out: dense_rows.append(a[0].shape[0]))
    try:
        for cuts in ([], [5], [17, 30], [1, 2, 3, 39]):
            kv = new_kv(runner)
            for a, b in zip([0] + cuts, cuts):
                runner.forward([Segment(kv, prompt[a:b], num_logits=0, prompt_on_kernel=True)])
                kv.length += b - a
            start = cuts[-1] if cuts else 0
            logits = runner.forward([Segment(kv, prompt[start:] + follow[:8], num_logits=9, prompt_on_kernel=True)])[0]
            assert torch.equal(logits, reference), cuts
            assert torch.equal(kv.keys[0][:, : len(prompt)], keys), cuts
    finally:
        hook.remove()
    assert dense_rows == []


@pytest.mark.parametrize("kernel_rows", [0, 16, 32])
def test_engine_runs_short_last_chunks_on_the_kernel_and_reuses_them_exactly(runner, kernel_rows):
    """The engine's route for a prompt's chunks depends on the prompt alone (``exact_prompt_kernel_rows``), so
    outputs with and without a prediction stay identical; a repeated prompt takes all of it but its last token
    from the prefix cache (its last chunk ran on the kernel, or on the library GEMM in the bounds a fresh request
    gives it again), and decodes as the fresh request did; a shorter prompt reuses only what its own chunks allow."""
    if not runner.exact_kernel or runner.attention_kernel is None:
        pytest.skip("the padded route has no kernel; fp16 has no attention kernel: its prompts stay on the library")
    tokenizer = make_tiny_tokenizer()
    rng = random.Random(5)
    prompts = [[rng.randrange(runner.vocab_size) for _ in range(n)] for n in (12, 40, 75)]  # last chunks 11, 7, 10
    fresh = make_engine(runner, tokenizer, prefix_cache=False, exact_prompt_kernel_rows=kernel_rows)
    assert fresh.pool.kernel_rows == kernel_rows
    layer = next(m for m in runner.model.modules() if isinstance(m, ExactKernelLinear) and m.dense is not None)
    dense_rows = []
    hook = layer.dense.register_forward_hook(lambda m, a, out: dense_rows.append(a[0].shape[0]))
    try:
        plain = [run(fresh, [r := request(p, 30, method="none")])[r.request_id] for p in prompts]
    finally:
        hook.remove()
    assert dense_rows == {0: [11, 32, 7, 32, 32, 10], 16: [32, 32, 32], 32: []}[kernel_rows]
    for p, out in zip(prompts, plain):
        for pred in (out, out[:10] + [3, 4] + out[12:], [9] * 30):
            assert run(fresh, [r := request(p, 30, prediction=pred)])[r.request_id] == out
    cached = make_engine(runner, tokenizer, exact_prompt_kernel_rows=kernel_rows)
    for p, out in zip(prompts, plain):
        for pred in (None, out):
            stats = {}
            assert run(cached, [r := request(p, 30, prediction=pred)], stats)[r.request_id] == out
        assert stats[r.request_id].cached_tokens == len(p) - 1  # the same prompt: its chunks' very bounds
        shorter = p[:-3] + [1]  # reuses positions of the last chunk computed with other bounds
        want = run(fresh, [r := request(shorter, 30, method="none")])[r.request_id]
        assert run(cached, [r := request(shorter, 30, prediction=out)], stats)[r.request_id] == want
        assert stats[r.request_id].cached_tokens == (len(p) - 3 if kernel_rows else (len(p) - 3) // 32 * 32)


def test_auto_prompt_kernel_rows_follow_the_kernel_and_the_cost_curve(runner, monkeypatch):
    from foretell.core.adaptive_k import CostModel
    from foretell.engine.llm_engine import prompt_kernel_rows

    cost, config = CostModel({8: 1.5, 16: 2.0, 32: 3.0}), EngineConfig(exact=True, prefill_chunk=512)
    if not runner.exact_kernel or runner.attention_kernel is None:
        assert prompt_kernel_rows(runner, cost, config) == 0
        return
    monkeypatch.setattr(ModelRunner, "kernel_on_amx", property(lambda self: False))
    assert prompt_kernel_rows(runner, cost, config) == 15  # a pass of 16 rows (15 + the last token) costs 2
    assert prompt_kernel_rows(runner, cost, EngineConfig(exact=True, exact_prompt_kernel_rows=3)) == 3
    assert prompt_kernel_rows(runner, cost, config, measure=lambda: 200) == 200  # where both routes were timed
    assert prompt_kernel_rows(runner, cost, EngineConfig(exact=True, exact_prompt_kernel_rows=3), lambda: 200) == 3
    monkeypatch.setattr(ModelRunner, "kernel_on_amx", property(lambda self: True))
    assert prompt_kernel_rows(runner, cost, config) == 512
    assert prompt_kernel_rows(runner, cost, config, measure=lambda: 1 / 0) == 512  # not measured on AMX tiles


def test_kernel_route_sends_prompt_chunks_to_the_library_gemm_and_other_rows_to_the_kernel(runner):
    """Prefill keeps the library's speed: a prompt chunk's rows reach the dense layer in one call per chunk,
    rows that need logits reach only the kernel, and the output head only the kernel."""
    if not runner.exact_kernel:
        pytest.skip("the padded route has no kernel")
    layers = [m for m in runner.model.modules() if isinstance(m, ExactKernelLinear)]
    head = runner.model.get_output_embeddings()
    assert isinstance(head, ExactKernelLinear) and head.dense is None
    layer = next(m for m in layers if m.dense is not None)
    a, b = new_kv(runner), new_kv(runner)
    prefill(runner, b, list(range(10)), 16)
    dense_rows, kernel_rows = [], []
    hooks = [layer.dense.register_forward_hook(lambda m, a, out: dense_rows.append(a[0].shape[0]))]
    original = layer.kernel
    layer.kernel = lambda x, **kw: (kernel_rows.append(x.reshape(-1, x.shape[-1]).shape[0]), original(x, **kw))[1]
    try:
        runner.forward([Segment(a, list(range(20)), num_logits=0), Segment(b, [3, 4, 5], num_logits=3),
                        Segment(new_kv(runner), list(range(7)), num_logits=2)])
    finally:
        hooks[0].remove()
        del layer.kernel
    assert dense_rows == [20, 5]  # the first request's chunk, the third's chunk (its last 2 rows need logits)
    assert kernel_rows == [5]  # 3 + 2 rows that need logits, in one call


def test_fixed_rows_runs_every_call_on_one_block_shape_and_keeps_the_results():
    """Exact mode's GPU route (FixedRows, checked bit for bit in tests/test_cuda.py on a GPU): every linear
    layer and RMSNorm sees blocks of exactly N rows whatever the pass, the head stays reachable for the
    runner, and the logits are those of the plain model (fp32 here, where blocking changes no result)."""
    from foretell.engine.runner import FixedRows, fix_rows

    plain = make_tiny_model(seed=4)
    wrapped = make_tiny_model(seed=4)
    assert fix_rows(wrapped, 8) == sum(1 for m in plain.modules()
                                       if type(m) is torch.nn.Linear or type(m).__name__.endswith("RMSNorm"))
    shapes = []
    for m in wrapped.modules():
        if isinstance(m, FixedRows):
            m.inner.register_forward_pre_hook(lambda _m, args: shapes.append(tuple(args[0].shape)))
    assert isinstance(wrapped.get_output_embeddings(), FixedRows)
    ids = torch.tensor([[3, 17, 5, 9, 11, 2, 8, 40, 41, 7, 6]])  # 11 rows: one full block and one padded
    with torch.no_grad():
        want, got = plain(ids).logits, wrapped(ids).logits
    assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5)
    assert shapes and all(shape[0] == 8 for shape in shapes)


def test_exact_mode_is_on_by_default_only_where_a_cpu_runs_foretells_kernels(monkeypatch):
    from foretell.engine import runner as runner_module
    from foretell.models import loader

    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(cpu_gemm, "load", lambda: SimpleNamespace(amx=False))  # the kernels build, without AMX
    monkeypatch.setattr(loader, "cpu_has_amx", lambda: False)
    assert runner_module.exact_by_default(cpu, torch.bfloat16)
    assert runner_module.exact_by_default(cpu, torch.float32)
    assert not runner_module.exact_by_default(gpu, torch.bfloat16)  # 64-row blocks: much slower passes
    monkeypatch.setattr(loader, "cpu_has_amx", lambda: True)
    assert not runner_module.exact_by_default(cpu, torch.bfloat16)  # AMX's GEMM against VDPBF16PS rows
    assert runner_module.exact_by_default(cpu, torch.float32)
    monkeypatch.setattr(cpu_gemm, "load", lambda: SimpleNamespace(amx=True))  # the kernels on AMX tiles too
    assert runner_module.exact_by_default(cpu, torch.bfloat16)
    monkeypatch.setattr(cpu_gemm, "load", lambda: None)  # no kernel: the padded route
    monkeypatch.setattr(loader, "cpu_has_amx", lambda: False)
    assert not runner_module.exact_by_default(cpu, torch.float32)


def test_from_config_runs_exact_by_default_and_falls_back_only_when_not_asked(tmp_path, monkeypatch, caplog):
    """Left to the engine, exact mode is on here (on the CPU, with the kernels; a GPU beside it is not used);
    where the start-up probe finds rows that depend on each other, a server that was not asked for exact mode
    starts without it (a warning), and one that was asked refuses to start."""
    from foretell.engine import llm_engine
    from foretell.engine import runner as runner_module
    from foretell.testing import save_tiny_model_dir

    if cpu_gemm.load() is None:
        pytest.skip("foretell's CPU kernel does not build here")
    monkeypatch.setattr(llm_engine, "exact_by_default", lambda device, dtype: True)  # AMX or not
    path = str(save_tiny_model_dir(tmp_path / "tiny"))

    def cpu_config(**kwargs):
        return EngineConfig(model=path, device="cpu", dtype="float32", measure_cost_curve=False, **kwargs)

    engine, _ = LLMEngine.from_config(cpu_config())
    assert engine.runner.exact and engine.runner.exact_kernel
    off, _ = LLMEngine.from_config(cpu_config(exact=False))
    assert not off.runner.exact

    def unavailable(*args, **kwargs):
        raise runner_module.ExactModeUnavailable("rows depend on each other (test)")

    monkeypatch.setattr(runner_module, "check_row_invariance", unavailable)
    with caplog.at_level("WARNING"):
        fallback, _ = LLMEngine.from_config(cpu_config())
    assert not fallback.runner.exact and "exact mode is off" in caplog.text
    assert not any(isinstance(m, ExactKernelLinear) for m in fallback.runner.model.modules())  # a fresh model
    with pytest.raises(runner_module.ExactModeUnavailable):
        LLMEngine.from_config(cpu_config(exact=True))


def test_a_peers_calls_run_on_the_library_gemm_inside_library_linears(runner, monkeypatch):
    """The benchmark runs HF's model.generate on the engine's model object: inside ``library_linears`` exact
    mode's layers use the library GEMM as the model would without foretell (only the output head, which keeps
    no library copy, stays on the kernel); outside, every row of such a call is a kernel row."""
    if not runner.exact_kernel:
        pytest.skip("the padded route has no kernel")
    gemm = next(m.gemm for m in runner.model.modules() if isinstance(m, ExactKernelLinear))
    calls = []
    real = gemm.linear
    monkeypatch.setattr(gemm, "linear", lambda x, *args: calls.append(x.shape) or real(x, *args))
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        runner.model(input_ids=ids, use_cache=False)
        outside = len(calls)
        calls.clear()
        with runner.library_linears():
            runner.model(input_ids=ids, use_cache=False)
    layers = [m for m in runner.model.modules() if isinstance(m, ExactKernelLinear)]
    groups = {id(m.group) for m in layers if m.group is not None}  # siblings in one call
    assert outside == sum(m.group is None for m in layers) + len(groups) > 1
    assert len(calls) == 1  # the head
    assert not runner._exact_rows.library


def test_decode_and_verify_passes_run_the_lean_loop_with_transformers_logits(runner, data, monkeypatch):
    """On both routes a pass whose every row needs logits (decode steps, verify passes, several requests)
    runs :class:`LeanDecoder`'s loop instead of transformers' forward, and its logits equal, to the bit, those of
    transformers' forward on the same pass; a pass with a prompt chunk still runs transformers' forward."""
    assert runner.lean
    forwards = []
    real = type(runner.model).forward
    monkeypatch.setattr(type(runner.model), "forward",
                        lambda self, *a, **kw: forwards.append(1) or real(self, *a, **kw))
    prompt, follow, _ = data
    prompts = [prompt, follow[:30]]
    kvs = [new_kv(runner) for _ in prompts]
    for kv, prompt in zip(kvs, prompts):
        prefill(runner, kv, prompt[:-1], 16)
    assert len(forwards) == sum(-(-(len(p) - 1) // 16) for p in prompts)  # prompt chunks: transformers
    forwards.clear()
    for sizes in ([1], [5], [1, 3], [6, 1]):
        segments = [Segment(kv, [prompt[-1]] + prompt[: n - 1], num_logits=n)
                    for kv, prompt, n in zip(kvs, prompts, sizes)]
        lean = [t.clone() for t in runner.forward(segments)]
        assert not forwards  # not transformers' forward
        saved, runner._lean = runner._lean, None
        try:
            reference = runner.forward(segments)
        finally:
            runner._lean = saved
        assert len(forwards) == 1
        forwards.clear()
        assert all(torch.equal(a, b) for a, b in zip(lean, reference))
    mixed = [Segment(kvs[0], [prompts[0][-1]], num_logits=1), Segment(new_kv(runner), prompts[1][:5], num_logits=1)]
    runner.forward(mixed)
    assert len(forwards) == 1  # a prompt chunk in the pass: transformers' forward


def test_a_lean_loop_that_differs_from_transformers_is_not_used(monkeypatch, caplog):
    """The start-up probe compares the loop with transformers' forward; a loop that is off by one ulp anywhere
    (here: every logit nudged) is refused and the runner keeps transformers' forward."""
    if cpu_gemm.load() is None:
        pytest.skip("foretell's CPU kernel does not build here")
    from foretell.engine.runner import LeanDecoder

    real = LeanDecoder.__call__
    monkeypatch.setattr(LeanDecoder, "__call__", lambda self, *a: torch.nextafter(real(self, *a), torch.tensor(1e9)))
    with caplog.at_level("WARNING"):
        built = ModelRunner(bf16_model(torch.float32), exact=True)
    assert built.exact_kernel and built._lean is None
    assert "lean decoder loop" in caplog.text
    def fail(self, *a):
        raise RuntimeError("a layout the loop does not follow")

    monkeypatch.setattr(LeanDecoder, "__call__", fail)
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert ModelRunner(bf16_model(torch.float32), exact=True)._lean is None  # refused, not a crash
    assert "lean decoder loop failed" in caplog.text
    monkeypatch.undo()
    assert ModelRunner(bf16_model(torch.float32), exact=True)._lean is not None


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_the_default_mode_runs_the_lean_loop_too(arch, monkeypatch):
    """Outside exact mode (the default on a CPU with AMX) decode and verify passes take the lean loop as well,
    token trees included (two drafts verified together), with transformers' logits; a model of another kind
    keeps transformers' forward."""
    runner = ModelRunner(make_tiny_model(arch, seed=2), exact=False)
    assert runner.lean and not runner.exact
    forwards = []
    real = type(runner.model).forward
    monkeypatch.setattr(type(runner.model), "forward",
                        lambda self, *a, **kw: forwards.append(1) or real(self, *a, **kw))
    kv = new_kv(runner)
    prefill(runner, kv, list(range(3, 20)), 8)
    tree = Segment(kv, [20, 21, 22, 30, 31, 32], num_logits=6, parents=[-1, 0, 0, 2, -1])
    for segment in (Segment(kv, [20, 21, 22], num_logits=3), tree):
        forwards.clear()
        lean = runner.forward([segment])[0].clone()
        assert not forwards  # the lean loop, not transformers' forward
        saved, runner._lean = runner._lean, None
        assert torch.equal(runner.forward([segment])[0], lean)
        runner._lean = saved
    # the tree's rows are its branches' rows: node 3 (after 20, 21) as a chain 20 21 30 gives its logits
    chain = runner.forward([Segment(kv, [20, 21, 30], num_logits=3)])[0]
    assert torch.allclose(lean[[0, 1, 3]], chain, atol=1e-4)
    monkeypatch.undo()
    other = make_tiny_model(arch, seed=2)
    monkeypatch.setattr(other.config, "model_type", "mistral")
    assert not ModelRunner(other, exact=False).lean


def test_padded_route_falls_back_to_fixed_row_blocks_where_padding_is_not_enough(monkeypatch):
    """A GEMM whose rows depend on how many rows the call has (as oneDNN's do on a Sapphire Rapids Xeon with
    AMX) defeats padding one-row calls to two: exact mode then runs every linear layer and norm on blocks of
    CPU_EXACT_ROWS rows, and the probe it must pass (rows alone == rows in a pass) holds again."""
    from foretell.engine import runner as runner_mod

    linear = torch.nn.functional.linear
    monkeypatch.setattr(torch.nn.functional, "linear", lambda x, w, b=None: linear(x, w, b) + (
        x.reshape(-1, x.shape[-1]).shape[0] % 5) * 1e-3)
    monkeypatch.setattr(runner_mod, "prepack_cpu_linears", lambda model: 0)  # plain nn.Linear: the fake above
    monkeypatch.setattr(cpu_gemm, "load", lambda: None)  # no kernel: the padded route
    hooked_only = bf16_model(torch.float32)
    runner_mod._hook_linears(hooked_only)
    with pytest.raises(runner_mod.ExactModeUnavailable):  # the fake GEMM really defeats padding alone
        runner_mod.check_row_invariance(hooked_only)

    built = ModelRunner(bf16_model(torch.float32), exact=True)
    blocks = [m for m in built.model.modules() if isinstance(m, runner_mod.FixedRows)]
    assert blocks and {m.rows for m in blocks} == {runner_mod.CPU_EXACT_ROWS}
    runner_mod.check_row_invariance(built.model)
    engine = make_engine(built, make_tiny_tokenizer())
    for prompt in ([3, 17, 5, 9, 11], [8, 40, 41, 7, 6, 2]):
        plain = run(engine, [r := request(prompt, 30, method="none")])[r.request_id]
        for pred in (plain, plain[:10] + [7, 8, 9] + plain[13:], [5] * 30):
            assert run(engine, [r := request(prompt, 30, prediction=pred)])[r.request_id] == plain


@pytest.mark.parametrize("route", ["amx", "avx2"])
def test_greedy_passes_take_the_argmax_head_and_keep_the_exact_heads_tokens(route, monkeypatch):
    """Passes whose requests need only the argmax read the head's int8 copy (cpu_gemm.ArgmaxHead; on AMX int8 tiles,
    or on AVX2 beside the VDPBF16PS / widened routes): on the near-tie model, greedy outputs with predictions,
    batched, equal those of the same runner without that copy; a request with logprobs in the batch sends its
    passes to the exact head and keeps its logprobs."""
    gemm = cpu_gemm.load()
    if gemm is None:
        pytest.skip("foretell's CPU kernel does not build here")
    if route == "avx2":
        gemm = gemm.without_amx()
        monkeypatch.setattr(cpu_gemm, "load", lambda: gemm)
    elif not gemm.amx:
        pytest.skip("no AMX here")
    with_head = ModelRunner(bf16_model(), exact=True)
    head = with_head.model.get_output_embeddings()
    if getattr(head, "argmax", None) is None:
        pytest.skip("this build has no int8 route for the head")
    assert head.argmax.tiles == (route == "amx")
    without = ModelRunner(bf16_model(), exact=True, argmax_head=False)
    assert without.model.get_output_embeddings().argmax is None
    served = []
    original = cpu_gemm.ArgmaxHead.logits

    def counted(self, x, weight, out=None):
        result = original(self, x, weight, out)
        served.append((x.reshape(-1, x.shape[-1]).shape[0], result is not None))
        return result

    monkeypatch.setattr(cpu_gemm.ArgmaxHead, "logits", counted)
    tokenizer = make_tiny_tokenizer()
    rng = random.Random(5)
    prompts = [[rng.randrange(with_head.vocab_size) for _ in range(n)] for n in (9, 30, 61)]
    outputs = []
    for runner in (without, with_head):
        engine = make_engine(runner, tokenizer)
        plain = [run(engine, [r := request(p, 48, method="none")])[r.request_id] for p in prompts]
        reqs = []
        for p, out in zip(prompts, plain):
            reqs += [request(p, 48, prediction=out[:20] + [3, 4] + out[22:]), request(p, 48, method="ngram")]
        logprobs = GenerationRequest(prompt_ids=prompts[0], max_tokens=12, ignore_eos=True,
                                     sampling=SamplingParams(temperature=0.0, logprobs=2))
        chunks = engine.generate(reqs + [logprobs])
        got = [[t for c in chunks[r.request_id] for t in c.new_token_ids] for r in reqs + [logprobs]]
        alone = engine.generate([logprobs])[logprobs.request_id]  # every pass its own: none takes the copy
        lps = [[lp for c in outs for lp in (c.new_logprobs or [])] for outs in (chunks[logprobs.request_id], alone)]
        outputs.append((plain, got, lps))
    assert outputs[0][:2] == outputs[1][:2]
    assert outputs[1][1][-1] == outputs[1][0][0][:12]
    assert len(outputs[1][2][1]) == 12 and outputs[0][2] == outputs[1][2]
    assert all(ok == (rows <= head.argmax.rows_max) for rows, ok in served)  # longer passes: the exact head
    assert sum(ok for _, ok in served) > 50


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_exact_mode_glues_norms_and_mlps_on_the_kernel_and_keeps_the_tokens(monkeypatch, dtype):
    """Exact mode on the kernel (bf16, and fp32 as on a CPU without native bf16) runs the RMSNorms and the SiLU MLPs
    on it (GlueRMSNorm, GlueMLP; the lean loop adds each residual in the next norm's pass): the loop still gives
    transformers' forward's logits to the bit (else ModelRunner would not take it), the glue serves every pass,
    greedy outputs with predictions, batched, equal plain decoding's, and a peer's model.generate on the same model
    (library mode) runs the modules the glue replaced."""
    from foretell.engine.runner import GlueMLP, GlueRMSNorm

    gemm = cpu_gemm.load()
    if gemm is None or not gemm.glues(dtype):
        pytest.skip(f"foretell's CPU kernel has no layer glue for {dtype} here (bf16 needs AVX-512 BW/VL)")
    runner = ModelRunner(bf16_model(dtype), exact=True)
    glued = [m for m in runner.model.modules() if isinstance(m, (GlueRMSNorm, GlueMLP))]
    assert len(glued) == 2 * 2 + 1 + 2 and runner.lean  # 2 layers: two norms and an MLP each, the final norm
    assert not any(isinstance(m, (GlueRMSNorm, GlueMLP))
                   for m in ModelRunner(bf16_model(dtype), exact=True, layer_glue=False).model.modules())
    calls = []
    for name in ("rmsnorm", "silu_mul", "rope"):
        original = getattr(cpu_gemm.CpuGemm, name)
        monkeypatch.setattr(cpu_gemm.CpuGemm, name,
                            lambda self, *a, _name=name, _f=original, **k: calls.append(_name) or _f(self, *a, **k))
    engine = make_engine(runner, make_tiny_tokenizer())
    rng = random.Random(11)
    prompts = [[rng.randrange(runner.vocab_size) for _ in range(n)] for n in (7, 33, 70)]
    plain = [run(engine, [r := request(p, 40, method="none")])[r.request_id] for p in prompts]
    assert calls.count("silu_mul") >= 2 * 40 and "rmsnorm" in calls and calls.count("rope") >= 2 * 2 * 39
    reqs = [request(p, 40, prediction=out[:15] + [1, 2] + out[17:]) for p, out in zip(prompts, plain)]
    reqs += [request(p, 40, prediction=out) for p, out in zip(prompts, plain)]
    got = run(engine, reqs)
    assert [got[r.request_id] for r in reqs] == plain + plain
    calls.clear()
    with runner.library_linears():
        runner.model.generate(torch.tensor([prompts[0]]), max_new_tokens=3, do_sample=False)
    assert calls == []
