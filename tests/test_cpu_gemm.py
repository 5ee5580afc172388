"""foretell's CPU GEMM (engine/cpu_gemm.c): F.linear's results, rows independent of each other, and a clean
refusal where it cannot be built."""

from __future__ import annotations

import copy

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


@pytest.fixture(params=["native", "widened"])
def bf16_route(gemm, request):
    """bf16 inputs with bf16 weights: VDPBF16PS where the CPU has AVX512-BF16, else widened to fp32."""
    if request.param == "native":
        if not gemm.bf16dot:
            if "avx512_bf16" in cpu_gemm._cpu_model():
                pytest.fail("this CPU has AVX512-BF16: the native bf16 kernel should have been built")
            pytest.skip("no AVX512-BF16 here")
        return gemm
    widened = copy.copy(gemm)
    widened._dot = None
    return widened


@pytest.mark.parametrize("n,k", [(9, 37), (130, 64), (64, 896), (7, 5), (13, 3000), (5, 33)])
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
