"""foretell's CPU GEMM (engine/cpu_gemm.c): F.linear's results, rows independent of each other, and a clean
refusal where it cannot be built."""

from __future__ import annotations

import copy
import ctypes
import os

import pytest
import torch

from foretell.engine import cpu_gemm


@pytest.fixture(scope="module")
def gemm():
    built = cpu_gemm.load()
    if built is None:
        if cpu_gemm.supported_cpu() and cpu_gemm._compiler():
            pytest.fail("the kernel should build on this machine (AVX2/AVX-512 and a C compiler are here)")
        pytest.skip("no AVX2/AVX-512 or no C compiler: the engine keeps the library kernels")
    return built


@pytest.mark.parametrize("n,k", [(48, 32), (50, 37), (3, 16), (130, 896), (7, 5)])
def test_matches_a_float64_reference_with_and_without_bias(gemm, n, k):
    gen = torch.Generator().manual_seed(n * 1000 + k)
    w, b = torch.randn(n, k, generator=gen), torch.randn(n, generator=gen)
    for rows in (1, 2, 3, 4, 5, 8, 13, 33):
        x = torch.randn(rows, k, generator=gen)
        for bias in (None, b):
            expected = torch.nn.functional.linear(x.double(), w.double(), None if bias is None else bias.double())
            torch.testing.assert_close(gemm.linear(x, w, bias), expected.float(), rtol=1e-5, atol=1e-4)


def test_keeps_leading_dimensions_and_takes_non_contiguous_input(gemm):
    w = torch.randn(24, 40)
    x = torch.randn(40, 2, 6).permute(1, 2, 0)  # (2, 6, 40), not contiguous
    got = gemm.linear(x, w)
    assert got.shape == (2, 6, 24)
    torch.testing.assert_close(got, torch.nn.functional.linear(x, w), rtol=1e-5, atol=1e-4)
    assert gemm.linear(torch.randn(0, 40), w).shape == (0, 24)


def test_a_rows_result_does_not_depend_on_the_other_rows(gemm):
    """Each output is one fixed-order reduction, whatever the call's row count: bit for bit (MKL's small-M
    GEMM does not promise this)."""
    gen = torch.Generator().manual_seed(1)
    w, b = torch.randn(70, 300, generator=gen), torch.randn(70, generator=gen)
    x = torch.randn(19, 300, generator=gen)
    alone = torch.cat([gemm.linear(x[i:i + 1], w, b) for i in range(19)])
    for rows in (2, 3, 4, 5, 7, 8, 12, 19):
        assert torch.equal(gemm.linear(x[:rows], w, b), alone[:rows]), rows
        assert torch.equal(gemm.linear(x[19 - rows:], w, b), alone[19 - rows:]), rows


@pytest.mark.parametrize("n,k", [(9, 37), (130, 67), (64, 896), (7, 5), (13, 3000)])
def test_bf16_weights_give_the_bits_of_their_fp32_widening(gemm, n, k):
    """Weights stored as bf16 (half the bytes) are widened exactly in registers: every output equals the fp32
    kernel's on the widened weights bit for bit, for one tile of rows and more (a block widened once into a
    buffer for short rows, widened as read for long ones: k = 3000), and rows stay independent."""
    gen = torch.Generator().manual_seed(n + k)
    narrow, b = torch.randn(n, k, generator=gen).bfloat16(), torch.randn(n, generator=gen)
    wide = narrow.float()
    x = torch.randn(17, k, generator=gen)
    alone = gemm.linear(x[:1], narrow, b)
    for rows in (1, 2, 3, 4, 5, 8, 9, 17):
        for bias in (None, b):
            got = gemm.linear(x[:rows], narrow, bias)
            assert torch.equal(got, gemm.linear(x[:rows], wide, bias)), (rows, bias is None)
        assert torch.equal(gemm.linear(x[:rows], narrow, b)[:1], alone), rows
    expected = torch.nn.functional.linear(x.double(), wide.double(), b.double()).float()
    torch.testing.assert_close(gemm.linear(x, narrow, b), expected, rtol=1e-5, atol=1e-4)


def has_amx() -> bool:
    return all(flag in cpu_gemm._cpu_model() for flag in (" amx_tile", " amx_bf16", " avx512_bf16"))


@pytest.fixture(scope="module")
def amx_gemm(gemm):
    """The kernel with its AMX routes (bf16 rows on AMX tiles), where this CPU has AMX."""
    if not gemm.amx:
        if os.environ.get("FORETELL_CPU_AMX") == "0":
            pytest.skip("AMX turned off (FORETELL_CPU_AMX=0)")
        library = ctypes.CDLL(str(gemm.path))
        if has_amx() and (not hasattr(library, "foretell_amx_init") or library.foretell_amx_init() == 0):
            pytest.fail("this CPU has AMX and Linux grants its tiles: the kernel's AMX routes should be on")
        pytest.skip("no AMX here, or Linux does not grant its tiles")
    return gemm


@pytest.fixture(params=["amx", "native", "widened"])
def bf16_route(gemm, request):
    """bf16 inputs with bf16 weights: on AMX tiles where the CPU has AMX (weights whose rows hold a multiple of 32
    values), VDPBF16PS where it has AVX512-BF16, else widened to fp32."""
    if request.param == "amx":
        return request.getfixturevalue("amx_gemm")
    native = gemm.without_amx()
    if request.param == "native":
        if not native.bf16dot:
            if "avx512_bf16" in cpu_gemm._cpu_model():
                pytest.fail("this CPU has AVX512-BF16: the native bf16 kernel should have been built")
            pytest.skip("no AVX512-BF16 here")
        return native
    widened = copy.copy(native)
    widened._dot = None
    return widened


@pytest.mark.parametrize("n,k", [(9, 37), (130, 64), (64, 896), (7, 5), (13, 3000), (5, 33), (40, 96)])
def test_bf16_inputs_match_a_float64_reference_and_rows_stay_independent(bf16_route, n, k):
    """A bf16 model's layer: bf16 in, bf16 out (each output rounded once), within bf16 rounding of the exact
    product; a row's bits do not depend on the other rows of the call (tiles of 1-4 rows, N and K tails)."""
    gen = torch.Generator().manual_seed(n * 7 + k)
    w, b = torch.randn(n, k, generator=gen).bfloat16(), torch.randn(n, generator=gen).bfloat16()
    x = torch.randn(17, k, generator=gen).bfloat16()
    expected = torch.nn.functional.linear(x.double(), w.double(), b.double())
    got = bf16_route.linear(x, w, b)
    assert got.dtype == torch.bfloat16 and got.shape == (17, n)
    torch.testing.assert_close(got.double(), expected, rtol=1.6e-2, atol=1e-3 * k ** 0.5)
    alone = torch.cat([bf16_route.linear(x[i:i + 1], w, b) for i in range(17)])
    for rows in (1, 2, 3, 4, 5, 8, 9, 17):
        assert torch.equal(bf16_route.linear(x[:rows], w, b), alone[:rows]), rows
        assert torch.equal(bf16_route.linear(x[17 - rows:], w, b), alone[17 - rows:]), rows
    assert torch.equal(bf16_route.linear(x, w), bf16_route.linear(x, w, torch.zeros(n))), "a zero bias adds nothing"


def test_logits_are_the_layers_values_as_float32_from_one_write(bf16_route):
    """The output head's route: ``logits`` gives ``linear(...).float()`` bit for bit, the bf16 rounding done in the
    kernel (ties to even, overflow to inf, NaN kept, as torch's ``.to(bfloat16)``); fp32 inputs unrounded; and
    into a caller's buffer, whose memory the result shares."""
    gen = torch.Generator().manual_seed(5)
    n, k = 70, 40
    special = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 1 + 2 ** -8 + 2 ** -20, 3.3e38, 3.4e38,
                            -3.4e38, float("inf"), -float("inf"), float("nan"), 1e-40, -1e-40, 0.0])
    bias = torch.cat([special, torch.randn(n - len(special), generator=gen) * 50])
    zero = torch.zeros(3, k).bfloat16()  # outputs = the bias exactly: the rounding alone
    w = torch.randn(n, k, generator=gen).bfloat16()
    got = bf16_route.logits(zero, w, bias)
    want = bias.bfloat16().float().expand(3, n)
    assert got.dtype == torch.float32 and torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))
    x = torch.randn(2, 9, k, generator=gen).bfloat16()
    for b in (None, bias[len(special):].repeat(2)[:n]):
        assert torch.equal(bf16_route.logits(x, w, b), bf16_route.linear(x, w, b).float())
    buffer = torch.full((20 * n,), 7.0)
    into = bf16_route.logits(x, w, out=buffer)
    assert into.shape == (2, 9, n) and into.data_ptr() == buffer.data_ptr()
    assert torch.equal(into, bf16_route.linear(x, w).float()) and torch.equal(buffer[18 * n:], torch.full((2 * n,), 7.0))
    x32, w32 = x.float() / 3, w.float() / 3  # fp32: no rounding
    assert torch.equal(bf16_route.logits(x32, w32), bf16_route.linear(x32, w32))
    with pytest.raises(ValueError, match="buffer"):
        bf16_route.logits(x, w, out=torch.empty(17 * n))


@pytest.mark.parametrize("route", ["fp32", "bf16 weights", "bf16"])
def test_an_output_has_the_same_bits_in_a_full_tile_as_summed_alone(gemm, route):
    """A full tile (4 weight rows x 4 input rows) sums its 16 accumulators side by side on transposed vectors;
    a weight row alone (N = 1) takes one horizontal sum each. Both are the same tree of additions, so the same
    bits: with and without bias, logits rounded to bf16 in the kernel, 1 to 9 input rows, K with a tail."""
    gen = torch.Generator().manual_seed(11)
    k = 200  # not a multiple of 16 or 32
    w, b = torch.randn(8, k, generator=gen), torch.randn(8, generator=gen) * 3
    x = torch.randn(9, k, generator=gen)
    if route != "fp32":
        w = w.bfloat16()
    if route == "bf16":
        x = x.bfloat16()
    for rows in (1, 3, 4, 9):
        for bias in (None, b):
            for rounded in (False, True):  # the kernel's fp32 sums, and rounded to bf16 as a bf16 head's logits
                tile = gemm._run(x[:rows], w, bias, None, rounded)
                for i in range(8):
                    alone = gemm._run(x[:rows], w[i:i + 1], None if bias is None else bias[i:i + 1], None, rounded)
                    assert torch.equal(tile[:, i:i + 1], alone), (rows, i, bias is None, rounded)


def test_exact_bf16_narrows_only_weights_that_are_exactly_bf16():
    w = torch.randn(6, 10).bfloat16().float()
    narrow = cpu_gemm.exact_bf16(w)
    assert narrow is not None and narrow.dtype == torch.bfloat16 and torch.equal(narrow.float(), w)
    w[2, 3] += 1e-6  # one value that a bf16 cannot hold
    assert cpu_gemm.exact_bf16(w) is None


def test_wrong_inputs_are_refused(gemm):
    with pytest.raises(TypeError):
        gemm.linear(torch.randn(2, 8, dtype=torch.float64), torch.randn(4, 8))
    with pytest.raises(ValueError):
        gemm.linear(torch.randn(2, 9), torch.randn(4, 8))
    with pytest.raises(TypeError):  # fp16 weights: neither fp32 nor bf16
        gemm.linear(torch.randn(2, 8), torch.randn(4, 8).half())
    with pytest.raises(TypeError):
        gemm.linear(torch.randn(2, 8), torch.randn(4, 8).bfloat16(), torch.randn(4).bfloat16())
    with pytest.raises(TypeError):  # bf16 inputs take bf16 weights only
        gemm.linear(torch.randn(2, 8).bfloat16(), torch.randn(4, 8))


def test_not_built_when_turned_off_or_without_a_working_compiler(monkeypatch, tmp_path, gemm):
    monkeypatch.setenv("FORETELL_CACHE_DIR", str(tmp_path))
    cpu_gemm.load.cache_clear()
    try:
        monkeypatch.setenv("FORETELL_CPU_GEMM", "0")
        assert cpu_gemm.load() is None
        monkeypatch.delenv("FORETELL_CPU_GEMM")
        cpu_gemm.load.cache_clear()
        monkeypatch.setenv("CC", "false")  # a compiler that fails: the library kernels stay
        assert cpu_gemm.load() is None
        assert not list(tmp_path.rglob("*.so"))
        monkeypatch.delenv("CC")
        cpu_gemm.load.cache_clear()
        built = cpu_gemm.load()  # built afresh into the new cache directory
        assert built is not None and built.path.is_relative_to(tmp_path)
    finally:
        cpu_gemm.load.cache_clear()


# ---- the attention for the rows that need logits (cpu_gemm.c: foretell_attention_*) ----

def _attention_reference(q, k, v, first, end, scale) -> torch.Tensor:
    """float64 softmax attention, query t over keys [first[t], end[t]) of its KV head."""
    heads, n, _ = q.shape
    rep = heads // k.shape[0]
    out = torch.empty(q.shape, dtype=torch.float64)
    for h in range(heads):
        for t in range(n):
            keys, values = k[h // rep, first[t] : end[t]].double(), v[h // rep, first[t] : end[t]].double()
            weights = torch.softmax(keys @ q[h, t].double() * scale, dim=0)
            out[h, t] = weights @ values
    return out


def _attention_case(heads, kv_heads, dim, n, dtype, seed, window=None, capacity=160):
    gen = torch.Generator().manual_seed(seed)
    k, v = (torch.randn(kv_heads, capacity, dim, generator=gen).to(dtype) for _ in range(2))
    q = torch.randn(heads, n, dim, generator=gen).to(dtype)
    end = [capacity - n + t + 1 - int(torch.randint(0, 3, (), generator=gen)) for t in range(n)]
    first = [0 if window is None else max(0, e - window) for e in end]
    return q, k, v, first, end


@pytest.mark.parametrize("heads,kv_heads,dim",
                         [(14, 2, 64), (12, 2, 128), (4, 4, 32), (4, 2, 16), (6, 3, 40), (10, 2, 44), (2, 2, 256)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_attention_matches_a_float64_reference(gemm, heads, kv_heads, dim, dtype):
    if not gemm.attends(dtype, dim):  # head sizes of at most 16 vectors: 256 with AVX-512, 128 with AVX2
        q, k, v, first, end = _attention_case(heads, kv_heads, dim, 9, dtype, seed=dim + heads, window=None)
        with pytest.raises(TypeError, match="attention takes"):
            gemm.attention(q, k, v, first, end, dim ** -0.5)
        assert gemm.lanes == 8 and dim > 128
        return
    for window in (None, 37):
        q, k, v, first, end = _attention_case(heads, kv_heads, dim, 9, dtype, seed=dim + heads, window=window)
        got = gemm.attention(q, k, v, first, end, dim ** -0.5)
        assert got.dtype == dtype and got.shape == q.shape
        expected = _attention_reference(q, k, v, first, end, dim ** -0.5)
        tol = 1e-5 if dtype == torch.float32 else 1e-2  # bf16: the output is rounded to bf16 once
        torch.testing.assert_close(got.double(), expected, rtol=tol, atol=tol)
    first, end = [0, 0, 3, k.shape[1] - 1], [1, 2, 5, k.shape[1]]  # a sequence's first keys, one key, the last
    got = gemm.attention(q[:, :4], k, v, first, end, dim ** -0.5)
    torch.testing.assert_close(got.double(), _attention_reference(q[:, :4], k, v, first, end, dim ** -0.5),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_attention_gives_a_query_the_same_bits_alone_and_beside_any_other_queries(gemm, dtype):
    """A query's result depends on its own keys only: alone (a decode step), at any place in a call of any
    length (a verify pass), beside queries that see other key ranges (other positions, a sliding window)."""
    for heads, kv_heads, dim in ((14, 2, 64), (12, 2, 128), (4, 2, 16), (10, 2, 44)):
        q, k, v, first, end = _attention_case(heads, kv_heads, dim, 40, dtype, seed=dim, window=None)
        first = [f + (t % 3) * 5 for t, f in enumerate(first)]  # key ranges that start apart too
        alone = [gemm.attention(q[:, t : t + 1], k, v, [first[t]], [end[t]], 0.125)[:, 0] for t in range(40)]
        for n in (2, 7, 33, 40):
            for start in (0, 40 - n):
                part = slice(start, start + n)
                got = gemm.attention(q[:, part], k, v, first[part], end[part], 0.125)
                for t in range(n):
                    assert torch.equal(got[:, t], alone[start + t]), (heads, dim, n, start, t)
    # a long context: queries share tiles of keys and values in blocks, fewer a block where their scores are long
    q, k, v, first, end = _attention_case(14, 2, 64, 21, dtype, seed=5, window=None, capacity=3000)
    first = [f + (t % 4) * 7 for t, f in enumerate(first)]
    got = gemm.attention(q, k, v, first, end, 0.125)
    for t in (0, 3, 8, 20):
        assert torch.equal(got[:, t], gemm.attention(q[:, t : t + 1], k, v, [first[t]], [end[t]], 0.125)[:, 0]), t
    torch.testing.assert_close(got[:, ::5].double(), _attention_reference(q[:, ::5], k, v, first[::5], end[::5], 0.125),
                               rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-5 if dtype == torch.float32 else 1e-2)


@pytest.mark.parametrize("heads,kv_heads,dim", [(14, 2, 64), (12, 2, 128), (6, 3, 40)])
def test_attention_with_a_sequences_tiled_keys_transposes_only_what_changed(gemm, heads, kv_heads, dim):
    """With the tiled keys a sequence keeps between calls (SeqKV.tiles), a call gives the same bits as without them
    while it transposes only the keys from ``valid`` on: a prompt, decode steps, drafts, a rollback whose positions
    get other keys. Tiles past what a call wrote hold NaN and are never read; a stale ``valid`` shows the tiles are
    what the scores read."""
    capacity = 300
    gen = torch.Generator().manual_seed(7)
    k, v = (torch.randn(kv_heads, capacity, dim, generator=gen) for _ in range(2))
    tile = gemm.key_tile
    tiles = torch.full((kv_heads, -(-capacity // tile), dim, tile), float("nan"))

    def call(start, n, valid, window=None):
        q = torch.randn(heads, n, dim, generator=gen)
        end = [start + t + 1 for t in range(n)]
        first = [0 if window is None else max(0, e - window) for e in end]
        want = gemm.attention(q, k, v, first, end, 0.125)
        got = gemm.attention(q, k, v, first, end, 0.125, tiles, valid)
        assert torch.equal(got, want), (start, n, valid)
        return q, first, end

    call(0, 100, 0)  # a prompt
    call(100, 1, 100)  # decode steps
    call(101, 1, 101)
    call(102, 16, 102)  # drafts, then a rollback to 105: other keys there
    k[:, 105:130] = torch.randn(kv_heads, 25, dim, generator=gen)
    call(105, 9, 105)
    call(114, 40, 114, window=37)  # a sliding window: ranges that start inside tiles
    q, first, end = call(154, 3, 154)
    k[:, 120:125] += 1.0  # keys the tiles hold already: a stale valid reads the old ones
    assert not torch.equal(gemm.attention(q, k, v, first, end, 0.125, tiles, 157),
                           gemm.attention(q, k, v, first, end, 0.125))
    assert torch.equal(gemm.attention(q, k, v, first, end, 0.125, tiles, 120), gemm.attention(q, k, v, first, end, 0.125))
    with pytest.raises(ValueError):  # tiles that end before the keys read
        gemm.attention(q, k, v, first, end, 0.125, tiles[:, :4].contiguous(), 0)


def test_bf16_attention_runs_on_vdpbf16ps_with_key_ranges_that_split_value_pairs(gemm):
    """Where the CPU has AVX512-BF16, bf16 attention (head size a multiple of 32) multiplies bf16 pairs
    natively: a different route from the widened fp32 one (other bits, the same values within bf16 rounding),
    and a query's bits stay its own where its key range starts or ends inside a pair of values (odd first or
    end), alone or beside queries whose ranges start elsewhere."""
    gemm = gemm.without_amx()
    if gemm._attention_dot is None:
        if "avx512_bf16" in cpu_gemm._cpu_model():
            pytest.fail("this CPU has AVX512-BF16: the native bf16 attention should have been built")
        pytest.skip("no AVX512-BF16 here")
    widened = copy.copy(gemm)
    widened._attention_dot = None
    q, k, v, _, _ = _attention_case(14, 2, 64, 12, torch.bfloat16, seed=11)
    first = [0, 1, 2, 3, 7, 8, 30, 31, 64, 65, 100, 101]
    end = [f + n for f, n in zip(first, (1, 1, 2, 3, 4, 5, 33, 34, 60, 61, 58, 59))]
    got = gemm.attention(q, k, v, first, end, 0.125)
    assert not torch.equal(got, widened.attention(q, k, v, first, end, 0.125))
    torch.testing.assert_close(got.double(), _attention_reference(q, k, v, first, end, 0.125), rtol=2e-2, atol=2e-2)
    for t in range(12):
        alone = gemm.attention(q[:, t : t + 1], k, v, [first[t]], [end[t]], 0.125)[:, 0]
        assert torch.equal(alone, got[:, t]), t
        pair = gemm.attention(q[:, [0, t]], k, v, [first[0], first[t]], [end[0], end[t]], 0.125)
        assert torch.equal(pair[:, 1], got[:, t]), t


def test_attention_refuses_what_it_cannot_take(gemm):
    q, k, v, first, end = _attention_case(4, 2, 64, 3, torch.float32, seed=0)
    assert not gemm.attends(torch.float16, 64) and not gemm.attends(torch.float32, 16 * 64)
    with pytest.raises(TypeError):
        gemm.attention(q.half(), k.half(), v.half(), first, end, 0.1)
    with pytest.raises(TypeError):  # caches of another dtype than the queries
        gemm.attention(q, k.bfloat16(), v.bfloat16(), first, end, 0.1)
    with pytest.raises(TypeError):  # a cache that is not contiguous
        gemm.attention(q, k.transpose(0, 1).contiguous().transpose(0, 1), v, first, end, 0.1)
    with pytest.raises(ValueError):  # keys past the cache
        gemm.attention(q, k, v, first, [e + 10 for e in end], 0.1)
    with pytest.raises(ValueError):  # an empty key range
        gemm.attention(q, k, v, end, end, 0.1)
    with pytest.raises(ValueError):  # query heads that are not a multiple of the KV heads
        gemm.attention(q[:3], k, v, first, end, 0.1)


def test_the_avx2_build_computes_the_same_attention_and_keeps_queries_independent(gemm, tmp_path):
    """The AVX2 code path (8-lane vectors), built here with AVX-512 turned off, where this CPU has AVX2."""
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("no AVX2 here")
    path = cpu_gemm._build(tmp_path, (*cpu_gemm.FLAGS, "-mno-avx512f"))  # (FLAGS is _build's default, bound once)
    avx2 = cpu_gemm.CpuGemm(__import__("ctypes").CDLL(str(path)), path)
    assert avx2.lanes == 8 and avx2.key_tile == 16
    cpu_gemm._check(avx2)
    for dtype in (torch.float32, torch.bfloat16):
        for heads, kv_heads, dim in ((14, 2, 64), (4, 2, 16), (6, 3, 40), (10, 2, 44)):
            q, k, v, first, end = _attention_case(heads, kv_heads, dim, 12, dtype, seed=dim, window=29)
            got = avx2.attention(q, k, v, first, end, dim ** -0.5)
            tol = 1e-5 if dtype == torch.float32 else 1e-2
            torch.testing.assert_close(got.double(), _attention_reference(q, k, v, first, end, dim ** -0.5),
                                       rtol=tol, atol=tol)
            for t in (0, 5, 11):
                alone = avx2.attention(q[:, t : t + 1], k, v, [first[t]], [end[t]], dim ** -0.5)
                assert torch.equal(alone[:, 0], got[:, t])
            if dtype == torch.float32:  # a sequence's tiled keys, 16 a tile here: transposed now, then kept
                tiles = torch.full((kv_heads, -(-k.shape[1] // avx2.key_tile), dim, avx2.key_tile), float("nan"))
                for valid in (0, min(end) - 5):
                    assert torch.equal(avx2.attention(q, k, v, first, end, dim ** -0.5, tiles, valid), got)


def test_amx_rows_are_their_own_and_round_like_the_other_routes(amx_gemm):
    """On AMX tiles (K a multiple of 32): other sums than VDPBF16PS's (the route is taken), within bf16 rounding of
    the exact product; a row's bits alone, in a call of any length (1-40 rows: one to three input tiles, a
    partial last one) and at any place in it, with N a multiple of 16 and not (a zeroed copy of the last weight
    rows); head logits rounded to bf16 in the kernel as ``.to(bfloat16)`` rounds (ties to even, inf, NaN)."""
    gen = torch.Generator().manual_seed(3)
    native = amx_gemm.without_amx()
    for n, k in ((64, 896), (37, 64), (16, 4864)):
        w, b = torch.randn(n, k, generator=gen).bfloat16(), torch.randn(n, generator=gen)
        x = torch.randn(40, k, generator=gen).bfloat16()
        got = amx_gemm.logits(x, w, b)
        torch.testing.assert_close(got.double(), torch.nn.functional.linear(x.double(), w.double(), b.double()),
                                   rtol=1.6e-2, atol=1e-3 * k ** 0.5)
        if k > 64:  # the fp32 sums of long rows: a route of their own
            assert not torch.equal(amx_gemm._run(x, w, b, None, False), native._run(x, w, b, None, False)), (n, k)
        alone = torch.cat([amx_gemm.logits(x[i : i + 1], w, b) for i in range(40)])
        assert torch.equal(alone, got)
        assert torch.equal(amx_gemm.linear(x, w, b).float(), got)  # bf16 written by the kernel: the same bits
        for first, rows in ((0, 16), (3, 17), (7, 33), (39, 1), (20, 20)):
            assert torch.equal(amx_gemm.logits(x[first : first + rows], w, b), got[first : first + rows])
    special = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 3.4e38, float("inf"), float("nan"), 0.0])
    bias = torch.cat([special, torch.randn(25, generator=gen) * 50])
    zero = torch.zeros(3, 64).bfloat16()  # outputs = the bias exactly: the rounding alone
    got = amx_gemm.logits(zero, torch.randn(32, 64, generator=gen).bfloat16(), bias)
    want = bias.bfloat16().float().expand(3, 32)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))
    bf16 = amx_gemm.linear(zero, torch.randn(32, 64, generator=gen).bfloat16(), bias)  # written as bf16 by the kernel
    assert bf16.dtype == torch.bfloat16 and torch.equal(bf16.float().isnan(), want.isnan())
    assert torch.equal(bf16.float().nan_to_num(0.0), want.nan_to_num(0.0))


def test_amx_attention_keeps_queries_apart_and_never_reads_past_the_last_key(amx_gemm):
    """Attention on AMX tiles (head sizes 64 and 128): other bits than VDPBF16PS (the route is taken), within
    bf16 rounding of the exact result; keys past every query's range are never read into a result, even where
    the cache holds NaN there (stale or never written); a query's bits alone and beside others whose ranges
    start and end elsewhere, across 16-query blocks and pairs of them."""
    native = amx_gemm.without_amx()
    for heads, kv_heads, dim in ((14, 2, 64), (12, 2, 128)):
        q, k, v, first, end = _attention_case(heads, kv_heads, dim, 37, torch.bfloat16, seed=dim, capacity=200)
        first = [f + (t % 4) * 9 for t, f in enumerate(first)]
        k[:, max(end):], v[:, max(end):] = float("nan"), float("nan")
        got = amx_gemm.attention(q, k, v, first, end, dim ** -0.5)
        assert not got.isnan().any()
        torch.testing.assert_close(got.double(), _attention_reference(q, k, v, first, end, dim ** -0.5),
                                   rtol=2e-2, atol=2e-2)
        assert not torch.equal(got, native.attention(q, k, v, first, end, dim ** -0.5))
        for t in range(37):
            alone = amx_gemm.attention(q[:, t : t + 1], k, v, [first[t]], [end[t]], dim ** -0.5)[:, 0]
            assert torch.equal(alone, got[:, t]), (dim, t)
        part = amx_gemm.attention(q[:, 5:30], k, v, first[5:30], end[5:30], dim ** -0.5)
        assert torch.equal(part, got[:, 5:30])
        # 16 queries run per query head; 1, 25 and 37 stacked, a KV head's query heads sharing a block
        sixteen = amx_gemm.attention(q[:, 5:21], k, v, first[5:21], end[5:21], dim ** -0.5)
        assert torch.equal(sixteen, got[:, 5:21])
    # 70 queries per query head: blocks in pairs (head size 64), ranges cut inside and across 16-key groups
    q, k, v, first, end = _attention_case(14, 2, 64, 70, torch.bfloat16, seed=5, capacity=400)
    first = [f + (t % 5) * 23 for t, f in enumerate(first)]
    got = amx_gemm.attention(q, k, v, first, end, 0.125)
    torch.testing.assert_close(got.double(), _attention_reference(q, k, v, first, end, 0.125), rtol=2e-2, atol=2e-2)
    for t in (0, 17, 31, 32, 50, 69):
        alone = amx_gemm.attention(q[:, t : t + 1], k, v, [first[t]], [end[t]], 0.125)[:, 0]
        assert torch.equal(alone, got[:, t]), t
    assert torch.equal(amx_gemm.attention(q[:, 3:40], k, v, first[3:40], end[3:40], 0.125), got[:, 3:40])
    q, k, v, first, end = _attention_case(4, 2, 96, 3, torch.bfloat16, seed=1)  # 96: not on AMX, still right
    torch.testing.assert_close(amx_gemm.attention(q, k, v, first, end, 0.1).double(),
                               _attention_reference(q, k, v, first, end, 0.1), rtol=2e-2, atol=2e-2)


def _near_tie_head(n: int, k: int, seed: int) -> torch.Tensor:
    """A bf16 head whose logits tie or nearly tie: rows repeated exactly (equal logits: the first index must win),
    rows one bf16 step apart in one value, and rows of very different scales."""
    gen = torch.Generator().manual_seed(seed)
    w = (torch.randn(n, k, generator=gen) * 0.05).bfloat16()
    w[1::7] = w[0::7][: len(w[1::7])]  # exact ties with the row before
    bumped = w[2::7].clone()
    bumped[:, 3] = torch.nextafter(bumped[:, 3].float(), torch.tensor(1.0)).bfloat16()
    w[3::7] = bumped[: len(w[3::7])]  # near ties
    w[4::7] *= 8
    w[5] = 0  # a zero row
    return w.contiguous()


def test_argmax_head_keeps_the_exact_heads_argmax_ties_included(bf16_route):
    """The int8 bound route (AMX int8 tiles, else AVX2), beside each exact route of the head: every row's argmax
    (the first maximum) is the exact head's, over 1-16 rows, bf16 and fp32 inputs (exact mode in fp32 reads a bf16
    copy of the head) with outlier dimensions, heads with tied and nearly tied rows; a candidate's value is the
    exact logit to the bit, every other value lies above its exact logit and below the row's maximum. More rows
    than the route takes (16 on tiles, 2 on AVX2) or a non-finite input: None (the caller runs the exact head)."""
    gemm = bf16_route
    if not cpu_gemm.ArgmaxHead.supports(gemm, torch.zeros(16, 64, dtype=torch.bfloat16)):
        pytest.skip("no int8 route in this build")
    dtypes = (torch.bfloat16,) if gemm._head_bounds is not None else (torch.bfloat16, torch.float32)
    for n, k, seed in ((400, 256, 0), (1024, 896, 1)):
        w = _near_tie_head(n, k, seed)
        head = cpu_gemm.ArgmaxHead(gemm, w)
        assert head.tiles == (gemm._head_bounds is not None)
        gen = torch.Generator().manual_seed(seed + 10)
        for dtype in dtypes:
            for m in (m for m in (1, 2, 5, 16) if m <= head.rows_max):
                for trial in range(6):
                    x = torch.randn(m, k, generator=gen) * (1 + 4 * trial)
                    x[:, trial * 7 % k] *= 40  # an outlier dimension, as a real model's hidden states have
                    if trial == 5:
                        x = w[: 2 * m : 2].float() * 30  # inputs aligned with tied rows: exact ties at the maximum
                    x = x.to(dtype)
                    _assert_bounded(head.logits(x, w), gemm.logits(x, w))
    # the bound is tight where every weight sits just past half a quantisation step: row 0's int8 copy
    # overestimates its logit by 98% of the bound's first term, and row 1's logit lies just above row 0's
    k = 256
    w = torch.zeros(32, k)
    w[0, 0], w[0, 1:] = 1.0, 0.508 / 127
    w = w.bfloat16()
    w[1] = (w[0].float().sum() + 0.004) / k
    w[2:] = (torch.randn(30, k, generator=gen) * 0.004).bfloat16()
    head = cpu_gemm.ArgmaxHead(gemm, w)
    for dtype in dtypes:
        x = torch.ones(1, k, dtype=dtype)
        exact = gemm.logits(x, w)
        assert exact[0].argmax() == 1 and exact[0, 1] - exact[0, 0] < 0.02
        _assert_bounded(head.logits(x, w), exact)
    assert head.logits(torch.randn(head.rows_max + 1, k).bfloat16(), w) is None
    bad = torch.randn(2, k).bfloat16()
    bad[1, 3] = float("nan")
    assert head.logits(bad, w) is None
    assert not cpu_gemm.ArgmaxHead.supports(gemm, w[:20])  # rows not a multiple of 16


def _assert_bounded(got: torch.Tensor, exact: torch.Tensor) -> None:
    """ArgmaxHead's promise: the exact logit at every maximum of each row (so the same argmax, ties included)
    and at any other candidate; elsewhere a value above the exact logit and below the row's maximum."""
    assert got is not None and got.shape == exact.shape
    top = exact.max(dim=-1, keepdim=True).values.expand_as(exact)
    same = got == exact
    assert same[exact == top].all()
    assert (got[~same] > exact[~same]).all() and (got[~same] < top[~same]).all()
    assert torch.equal(got.argmax(dim=-1), exact.argmax(dim=-1))


def _bf16_steps(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many bf16 values apart a and b are (same signs assumed: int16 bit patterns)."""
    return (a.view(torch.int16).int() - b.view(torch.int16).int()).abs()


@pytest.mark.parametrize("m,k", [(1, 896), (37, 896), (5, 1000), (3, 17)])
def test_rmsnorm_rounds_as_torchs_bf16_module_and_keeps_rows_apart(gemm, m, k):
    """The layer glue's RMSNorm (Qwen2RMSNorm's formula on bf16 rows, with the residual addition before it): the sum
    is torch's bf16 addition to the bit; the normalised rows agree with torch's module but for the last bit of a few
    values (the kernel's own sum of squares); a row has the same bits alone and among others."""
    if not gemm.glue:
        pytest.skip("this build has no layer glue (it needs AVX-512 BW/VL)")
    gen = torch.Generator().manual_seed(m * k)
    h = (torch.randn(m, k, generator=gen) * 3).bfloat16()
    delta = torch.randn(m, k, generator=gen).bfloat16()
    weight = (torch.rand(k, generator=gen) + 0.5).bfloat16()
    total, y = gemm.rmsnorm(h, weight, 1e-6, residual=delta)
    assert torch.equal(total, h + delta)
    x = total.float()
    reference = weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)).bfloat16()
    steps = _bf16_steps(y, reference)
    assert int(steps.max()) <= 1 and int((steps > 0).sum()) <= max(1, y.numel() // 1000)
    assert torch.equal(gemm.rmsnorm(total, weight, 1e-6)[1], y)
    for i in range(m):
        assert torch.equal(gemm.rmsnorm(h[i : i + 1], weight, 1e-6, residual=delta[i : i + 1])[1], y[i : i + 1])


@pytest.mark.parametrize("m,n", [(1, 4864), (130, 4864), (3, 37)])
def test_silu_mul_rounds_as_torchs_bf16_ops_on_a_joined_result_read_in_place(gemm, m, n):
    """The layer glue's SiLU(gate) * up on the halves of one [m, 2n] result (views, read in place): torch's values
    but for the last bit of a few (the kernel's own exponential), rows independent; very negative gates give -0."""
    if not gemm.glue:
        pytest.skip("this build has no layer glue (it needs AVX-512 BW/VL)")
    gen = torch.Generator().manual_seed(m + n)
    joined = (torch.randn(1, m, 2 * n, generator=gen) * 4).bfloat16()
    gate, up = joined.split(n, dim=-1)
    y = gemm.silu_mul(gate, up)
    assert y.shape == (1, m, n)
    steps = _bf16_steps(y, torch.nn.functional.silu(gate) * up)
    assert int(steps.max()) <= 1 and int((steps > 0).sum()) <= max(1, y.numel() // 1000)
    assert torch.equal(gemm.silu_mul(gate.contiguous(), up.contiguous()), y)
    for i in range(m):
        assert torch.equal(gemm.silu_mul(gate[:, i : i + 1], up[:, i : i + 1]), y[:, i : i + 1])
    far = torch.tensor([-1000.0, -100.0, -89.0, 0.0, 100.0]).bfloat16()
    assert gemm.silu_mul(far, torch.ones_like(far)).tolist() == [0.0, 0.0, 0.0, 0.0, 100.0]
    with pytest.raises(TypeError):
        gemm.silu_mul(gate.float(), up)


@pytest.mark.parametrize("heads,rows,dim", [(14, 1, 64), (2, 37, 64), (3, 5, 128), (2, 3, 40)])
def test_rope_gives_transformers_rotary_embedding_to_the_bit_from_a_projections_view(gemm, heads, rows, dim):
    """The layer glue's rotary embedding on a [1, heads, rows, D] view of a projection's output (rows of a joined
    q/k/v result: strides of a transpose), with bf16 cos/sin: transformers' apply_rotary_pos_emb in bf16, every bit."""
    from transformers.models.qwen2.modeling_qwen2 import apply_rotary_pos_emb

    if not gemm.glue:
        pytest.skip("this build has no layer glue (it needs AVX-512 BW/VL)")
    gen = torch.Generator().manual_seed(heads * rows + dim)
    joined = (torch.randn(1, rows, (heads + 3) * dim, generator=gen) * 5).bfloat16()
    q = joined[..., dim : (heads + 1) * dim].view(1, rows, heads, dim).transpose(1, 2)
    angles = torch.randn(1, rows, dim, generator=gen) * 3
    cos, sin = angles.cos().bfloat16(), angles.sin().bfloat16()
    expected, _ = apply_rotary_pos_emb(q, q, cos, sin)
    got = gemm.rope(q, cos, sin)
    assert got.is_contiguous() and torch.equal(got, expected)
    assert torch.equal(gemm.rope(q[:, :, -1:], cos[:, -1:], sin[:, -1:]), expected[:, :, -1:])


def _glue_fp32_checks(gemm):
    """fp32 layer glue against torch's fp32 modules and ops: the residual sum and the rotary embedding to the bit,
    RMSNorm and SiLU · up within a few ulps (the kernel's own sum of squares and exponential), rows independent,
    odd widths (vector tails) included."""
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm, apply_rotary_pos_emb

    gen = torch.Generator().manual_seed(5)
    for m, k in ((1, 896), (37, 896), (3, 44)):
        h, delta = torch.randn(m, k, generator=gen) * 3, torch.randn(m, k, generator=gen)
        norm = Qwen2RMSNorm(k, eps=1e-6)
        norm.weight.data = torch.randn(k, generator=gen)
        total, y = gemm.rmsnorm(h, norm.weight.data, 1e-6, residual=delta)
        assert torch.equal(total, h + delta)
        torch.testing.assert_close(y, norm(h + delta), rtol=3e-6, atol=1e-6)
        assert torch.equal(gemm.rmsnorm(total, norm.weight.data, 1e-6)[1], y)
        for i in (0, m - 1):
            assert torch.equal(gemm.rmsnorm(h[i : i + 1], norm.weight.data, 1e-6, residual=delta[i : i + 1])[1],
                               y[i : i + 1])
    for m, n in ((1, 4864), (130, 4864), (3, 37)):
        joined = torch.randn(1, m, 2 * n, generator=gen) * 4
        gate, up = joined.split(n, dim=-1)
        y = gemm.silu_mul(gate, up)
        torch.testing.assert_close(y, torch.nn.functional.silu(gate) * up, rtol=3e-6, atol=1e-7)
        assert torch.equal(gemm.silu_mul(gate[:, -1:], up[:, -1:]), y[:, -1:])
    far = torch.tensor([-1000.0, -100.0, -89.0, 0.0, 100.0])
    assert gemm.silu_mul(far, torch.ones_like(far)).tolist() == [-0.0, -0.0, -0.0, 0.0, 100.0]
    for heads, rows, dim in ((14, 1, 64), (2, 37, 64), (3, 5, 128), (2, 3, 40)):
        joined = torch.randn(1, rows, (heads + 3) * dim, generator=gen) * 5
        q = joined[..., dim : (heads + 1) * dim].view(1, rows, heads, dim).transpose(1, 2)
        angles = torch.randn(1, rows, dim, generator=gen) * 3
        cos, sin = angles.cos(), angles.sin()
        expected, _ = apply_rotary_pos_emb(q, q, cos, sin)
        got = gemm.rope(q, cos, sin)
        assert got.is_contiguous() and torch.equal(got, expected)
        assert torch.equal(gemm.rope(q[:, :, -1:], cos[:, -1:], sin[:, -1:]), expected[:, :, -1:])
    with pytest.raises(TypeError):
        gemm.rope(q, cos.bfloat16(), sin.bfloat16())


def test_fp32_layer_glue_matches_torchs_ops_and_keeps_rows_apart(gemm):
    """The fp32 glue of this build (every build has it: fp32 exact mode on a CPU without native bf16)."""
    assert gemm.glues(torch.float32)
    _glue_fp32_checks(gemm)


def test_the_avx2_build_has_the_fp32_layer_glue(tmp_path):
    """The fp32 glue's AVX2 code path (8-lane vectors, tails through masked loads), built with AVX-512 turned off."""
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("no AVX2 here")
    path = cpu_gemm._build(tmp_path, (*cpu_gemm.FLAGS, "-mno-avx512f"))  # (FLAGS is _build's default, bound once)
    avx2 = cpu_gemm.CpuGemm(__import__("ctypes").CDLL(str(path)), path)
    assert avx2.lanes == 8 and avx2.glues(torch.float32) and not avx2.glues(torch.bfloat16)
    _glue_fp32_checks(avx2)
