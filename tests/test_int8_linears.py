"""Exact mode's int8 route: linear layers converted from GGUF blocks multiply them with int8 inputs (llama.cpp's
numerics) on AVX512-VNNI, each row alone, so predictions stay lossless.

The kernel is checked against an independent reference (gguf-py's decoder, numpy's rounding, float64 sums), for
row independence in every pass size, and end to end: a tiny qwen2 written as a quantized GGUF, converted, loaded in
fp32 with the route on, gives with perfect, edited, garbage and empty predictions, batched, every token that its
own plain decoding gives, and its layers really read the blocks.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from foretell.config import EngineConfig
from foretell.engine import cpu_gemm
from foretell.engine.cpu_gemm import GgufWeight
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import ExactKernelLinear, ExactRows, ModelRunner, int8_by_default
from foretell.models import loader
from foretell.testing.tiny_gguf import random_blocks
from test_gguf_blocks import convert_tiny, outputs, request  # as the bf16 blocks' tests make and run them

gguf = pytest.importorskip("gguf")
FORMATS = ["Q8_0", "Q5_0", "Q4_K", "Q6_K"]


def has_vnni() -> bool:
    try:
        return " avx512_vnni" in open("/proc/cpuinfo").read()
    except OSError:
        return False


def has_avx2() -> bool:
    try:
        cpuinfo = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return all(f" {flag}" in cpuinfo for flag in ("avx2", "fma", "f16c"))


@pytest.fixture(scope="module")
def gemm():
    built = cpu_gemm.load()
    if built is None or not built.int8:
        assert not has_vnni() and not has_avx2(), "the CPU has AVX512-VNNI or AVX2, but foretell's kernel did not " \
            "build its int8 products"
        pytest.skip("foretell's int8 products need AVX512-VNNI or AVX2")
    return built


@pytest.fixture(scope="module")
def many_rows(gemm):
    """The int8 route's many-row kernel and its panels (AVX512-VNNI builds)."""
    if not gemm.int8_many_rows:
        assert not has_vnni(), "the CPU has AVX512-VNNI, but foretell's kernel did not build its many-row kernel"
        pytest.skip("the int8 route's many-row kernel and panels are built for AVX512-VNNI")
    return gemm


@pytest.fixture(scope="module", params=["native", "avx2"])
def kernels(request, gemm, tmp_path_factory):
    """The machine's build, and the AVX2 build (``-march=haswell``: VPMADDUBSW, whatever AVX-512 the CPU has), so
    both int8 kernels are checked on a CPU with AVX-512."""
    if request.param == "native":
        return gemm
    if not has_avx2():
        pytest.skip("the AVX2 build needs a CPU with AVX2, FMA and F16C")
    import ctypes

    flags = tuple("-march=haswell" if f == "-march=native" else f for f in cpu_gemm.FLAGS)
    path = cpu_gemm._build(tmp_path_factory.mktemp("avx2"), flags)
    built = cpu_gemm.CpuGemm(ctypes.CDLL(str(path)), path, amx=False)
    assert built.int8 and not built.int8_many_rows and built.lanes == 8
    return built


def blocks_of(fmt: str, rows: int, cols: int, seed: int = 0) -> tuple[GgufWeight, np.ndarray]:
    """Random blocks of ``fmt`` and their values as gguf-py's reference decoder gives them (float32)."""
    qtype = getattr(gguf.GGMLQuantizationType, fmt)
    if fmt in ("Q8_0", "Q5_0"):
        values = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32) * 0.05
        raw = gguf.quants.quantize(values, qtype)
    else:
        raw = random_blocks(fmt, rows, cols, seed=seed)
    decoded = gguf.quants.dequantize(raw, qtype).reshape(rows, cols).astype(np.float32)
    data = torch.from_numpy(np.ascontiguousarray(raw).reshape(-1).copy())
    return GgufWeight(int(qtype), data, (rows, cols)), decoded


def reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """llama.cpp's scheme in float64: each 32 inputs scaled to int8 by max |x| / 127 (float32, rounded to the
    nearest, ties to even), products of the scaled values and the weights summed exactly."""
    m, k = x.shape
    blocks = x.reshape(m, k // 32, 32).astype(np.float32)
    amax = np.abs(blocks).max(axis=2, keepdims=True)
    scale = (amax / np.float32(127)).astype(np.float32)
    inverse = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    q = np.clip(np.rint(blocks * inverse), -127, 127)
    y = (q * scale).reshape(m, k).astype(np.float64) @ w.astype(np.float64).T
    return y if bias is None else y + bias


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_blocks_decode_as_gguf_decodes_them(kernels, fmt):
    weight, decoded = blocks_of(fmt, 12, 512, seed=1)
    assert np.array_equal(kernels.decode_blocks(weight).numpy(), decoded)
    assert np.array_equal(kernels.decode_blocks(weight, 5, 4).numpy(), decoded[5:9])  # some rows alone
    with pytest.raises(ValueError):
        kernels.decode_blocks(weight, 10, 3)


@pytest.mark.parametrize("fmt", FORMATS)
def test_int8_products_are_llama_cpps_and_each_row_is_computed_alone(kernels, fmt):
    """Against the float64 reference (to float32 rounding of the sums), with an outlier channel and a bias; every
    row the same bits alone and in passes of 1-9, 33 and 57 rows (each way each build sums the products); a row
    with an inf is NaN, the others unchanged. Rows of 576 values (Q5_0, Q8_0): two
    groups of 256 and a chunk after them."""
    width = 512 if fmt in ("Q4_K", "Q6_K") else 576
    weight, decoded = blocks_of(fmt, 37, width, seed=2)
    bias = torch.randn(37, generator=torch.Generator().manual_seed(0))
    x = torch.randn(9, width, generator=torch.Generator().manual_seed(1))
    x[:, 7] = 20.0  # an outlier: its block's other values lose precision, as in llama.cpp
    got = kernels.linear_int8(x, weight, bias)
    want = reference(x.numpy(), decoded, bias.numpy().astype(np.float64))
    size = np.abs(x.numpy()).astype(np.float64) @ np.abs(decoded).astype(np.float64).T + 1.0
    assert np.all(np.abs(got.numpy() - want) <= 2e-6 * size)
    # far from the fp32 product where the quantization says so, and only there
    exact = x.double().numpy() @ decoded.astype(np.float64).T + bias.numpy()
    assert not np.allclose(got.numpy(), exact, rtol=0, atol=1e-4)
    for rows in range(1, 10):
        for start in range(0, 9 - rows + 1, 4):
            part = kernels.linear_int8(x[start : start + rows].clone(), weight, bias)
            assert torch.equal(part, got[start : start + rows])
    many = torch.cat([x, torch.randn(48, width, generator=torch.Generator().manual_seed(3))])
    assert torch.equal(kernels.linear_int8(many[:33], weight, bias)[:9], got)  # 33 rows: 8 tiles and one of 1
    # 57 rows: AVX2's passes of 48 rows and more read each input group once for 4 weight rows (a2_rows_xs)
    assert torch.equal(kernels.linear_int8(many, weight, bias)[:9], got)
    broken = x.clone()
    broken[3, 100] = float("inf")
    out = kernels.linear_int8(broken, weight, bias)
    assert torch.isnan(out[3]).all() and torch.equal(out[torch.arange(9) != 3], got[torch.arange(9) != 3])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("groups", [4, 6])
def test_int8_passes_of_every_size_give_each_row_its_bits_alone(kernels, fmt, groups):
    """Rows of up to 4 groups of 256 values (AVX2: passes of 10 rows and more hold each input row's sums in
    registers over its groups) and of more (passes of 48 rows and more go group by group): passes of 1-70 rows,
    each row the bits it has alone, against the float64 reference too; 37 weight rows (a last block of 1)."""
    width = 256 * groups if fmt in ("Q4_K", "Q6_K") else 256 * groups - 192  # Q5_0 and Q8_0: a last group of 64
    weight, decoded = blocks_of(fmt, 37, width, seed=11)
    bias = torch.randn(37, generator=torch.Generator().manual_seed(12))
    x = torch.randn(70, width, generator=torch.Generator().manual_seed(13))
    alone = torch.cat([kernels.linear_int8(x[i : i + 1].clone(), weight, bias) for i in range(70)])
    want = reference(x.numpy(), decoded, bias.numpy().astype(np.float64))
    size = np.abs(x.numpy()).astype(np.float64) @ np.abs(decoded).astype(np.float64).T + 1.0
    assert np.all(np.abs(alone.numpy() - want) <= 2e-6 * size)
    for rows in (2, 9, 10, 11, 16, 33, 47, 48, 53, 70):
        assert torch.equal(kernels.linear_int8(x[:rows], weight, bias), alone[:rows]), rows


@pytest.mark.parametrize("fmt", FORMATS)
def test_prompt_chunks_take_the_same_int8_products_laid_out_for_many_rows(many_rows, fmt):
    """gemm_int8 (a prompt chunk's rows): against the float64 reference as linear_int8, with an outlier channel and
    a bias; 48 outputs (a tile of 32 and one of 16) and 23 rows (tiles of 6 and one of 5); every row the same bits
    alone, in any slice; a row with an inf: None (the caller computes the chunk on the library)."""
    width = 512 if fmt in ("Q4_K", "Q6_K") else 576
    weight, decoded = blocks_of(fmt, 48, width, seed=4)
    bias = torch.randn(48, generator=torch.Generator().manual_seed(5))
    x = torch.randn(23, width, generator=torch.Generator().manual_seed(6))
    x[:, 9] = -30.0
    got = many_rows.gemm_int8(x, weight, bias)
    want = reference(x.numpy(), decoded, bias.numpy().astype(np.float64))
    size = np.abs(x.numpy()).astype(np.float64) @ np.abs(decoded).astype(np.float64).T + 1.0
    assert np.all(np.abs(got.numpy() - want) <= 2e-6 * size)
    assert np.allclose(got.numpy(), many_rows.linear_int8(x, weight, bias).numpy(), rtol=0, atol=1e-5 * size.max())
    for start, rows in ((0, 1), (5, 1), (3, 7), (11, 12)):
        assert torch.equal(many_rows.gemm_int8(x[start : start + rows].clone(), weight, bias), got[start : start + rows])
    assert torch.equal(many_rows.gemm_int8(x, weight)[:, :16] + bias[:16], got[:, :16])
    broken = x.clone()
    broken[3, 100] = float("inf")
    assert many_rows.gemm_int8(broken, weight, bias) is None


@pytest.mark.parametrize("fmt", FORMATS)
def test_panels_give_every_pass_the_bits_of_the_many_row_kernel(many_rows, fmt):
    """Blocks laid out as panels (16 weight rows' values in the order the many-row kernel's tiles read them, as many
    bits as the file's): linear_int8 on them, in passes of 1 to 40 rows (read into registers or through a buffer)
    and row by row, and gemm_int8 on them give
    gemm_int8's bits on the file's blocks (its order of float sums; checked against the float64 reference above),
    with a bias; as many bytes as the blocks (Q4_K 148 a super-block and row, against 144); a row with an inf is
    NaN alone; a weight of rows not a multiple of 16 keeps its blocks."""
    width = 512 if fmt in ("Q4_K", "Q6_K") else 576
    weight, _ = blocks_of(fmt, 48, width, seed=7)
    panels = many_rows.panels(weight)
    assert panels is not None and panels.fmt == cpu_gemm.PANELS + weight.fmt and panels.shape == weight.shape
    assert panels.data.numel() == (weight.data.numel() * 148 // 144 if fmt == "Q4_K" else weight.data.numel())
    assert many_rows.panels(panels) is None and many_rows.int8_takes(panels)
    bias = torch.randn(48, generator=torch.Generator().manual_seed(8))
    x = torch.randn(40, width, generator=torch.Generator().manual_seed(9))
    x[:, 7] = 25.0
    want = many_rows.gemm_int8(x, weight, bias)
    assert not torch.equal(want, many_rows.linear_int8(x, weight, bias))  # another order than the blocks' decode kernel
    assert many_rows.p8_fused_rows == 16
    try:  # short passes read the panels into registers (p8_tile), long ones through a buffer: the same bits
        for fused_rows in (16, 0, 40):
            many_rows.p8_fused_rows = fused_rows
            for rows in (1, 2, 5, 6, 7, 9, 13, 16, 17, 40):
                assert torch.equal(many_rows.linear_int8(x[:rows], panels, bias), want[:rows]), (fused_rows, rows)
    finally:
        many_rows.p8_fused_rows = 16
    assert torch.equal(torch.cat([many_rows.linear_int8(x[i : i + 1], panels, bias) for i in range(9)]), want[:9])
    assert torch.equal(many_rows.gemm_int8(x, panels, bias), want)
    broken = x[:5].clone()
    broken[2, 100] = float("inf")
    out = many_rows.linear_int8(broken, panels, bias)
    assert torch.isnan(out[2]).all() and torch.equal(out[torch.arange(5) != 2], want[:5][torch.arange(5) != 2])
    assert many_rows.panels(blocks_of(fmt, 40, width, seed=7)[0]) is None


def test_a_format_or_width_it_cannot_take_is_refused(kernels):
    weight, _ = blocks_of("Q8_0", 8, 96)  # 96 values a row: not a multiple of 64
    assert not kernels.int8_takes(weight)
    with pytest.raises(ValueError, match="linear_int8 takes"):
        kernels.linear_int8(torch.ones(1, 96), weight)


def test_a_layer_takes_the_int8_route_only_for_blocks_of_its_own_weights(gemm):
    weight, decoded = blocks_of("Q5_0", 37, 512, seed=4)
    other, _ = blocks_of("Q5_0", 37, 512, seed=5)

    def layer(blocks, int8=True):
        linear = torch.nn.Linear(512, 37, bias=True)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(decoded).bfloat16().float())  # the converted model's weights
        linear.gguf_weight = blocks
        return ExactKernelLinear(linear, gemm, ExactRows(), int8=int8)

    assert layer(other).int8 is None  # not its weights
    one_row = GgufWeight(weight.fmt, weight.data.clone(), weight.shape)  # its weights but for one checked row
    one_row.data.view(37, -1)[36] = other.data.view(37, -1)[36]
    assert layer(one_row).int8 is None
    assert layer(weight, int8=False).int8 is None
    taken = layer(weight)
    assert taken.int8 is weight
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = taken(x)
        assert torch.equal(got, gemm.linear_int8(x, weight, taken.kernel_bias))
        weight.data.copy_(other.data)  # really read: other blocks give another result
        assert not torch.equal(taken(x), got)


@pytest.mark.parametrize("panels", [True, False])
def test_a_pass_with_prompt_chunks_on_panels_is_one_call_with_each_rows_bits(many_rows, panels, monkeypatch):
    """A pass that holds prompt chunks and rows that need logits (a prompt's last chunk with the first draft, or a
    batch of prefill and decode): on panels every row runs on the one many-row kernel, so the layer makes one
    call for the whole pass (no second read of the weights, no copy of the chunks into place), and every row has
    the bits of that row computed alone; on blocks the chunks and the other rows are two calls, as before. A layer
    on the int8 route keeps no bf16 copy of its weight (no pass reads it)."""
    weight, decoded = blocks_of("Q5_0", 48, 512, seed=11)
    linear = torch.nn.Linear(512, 48, bias=True)
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(decoded).bfloat16().float())
    linear.gguf_weight = weight
    rows = ExactRows()
    layer = ExactKernelLinear(linear, many_rows, rows, int8=True, panels=panels)
    assert (layer.int8.fmt >= cpu_gemm.PANELS) == panels
    # no pass reads the kernel's bf16 copy of the weight (every kernel row takes int8 products): none is kept; on
    # panels no pass reads the library's fp32 one either
    assert layer.kernel_weight.numel() == 0 and (layer.dense is None) == panels
    x = torch.randn(1, 23, 512, generator=torch.Generator().manual_seed(12))
    rows.total, rows.chunks = 23, [(0, 10), (13, 7)]  # two prompt chunks; rows 10-12 and 20-22 need logits
    rows.others = torch.tensor([10, 11, 12, 20, 21, 22])
    calls = []
    for name in ("_gemm_q8", "_linear_q8"):
        original = getattr(many_rows, name)
        monkeypatch.setattr(many_rows, name, lambda *args, _f=original, _n=name: calls.append((_n, args[5])) or _f(*args))
    with torch.no_grad():
        got = layer(x)
    monkeypatch.undo()
    rows.clear()
    with torch.no_grad():
        alone = torch.cat([layer(x[:, i : i + 1]) for i in range(23)], dim=1)
    if panels:
        assert calls == [("_gemm_q8", 23)]
        assert torch.equal(got, alone)
    else:
        assert sorted(calls) == [("_gemm_q8", 7), ("_gemm_q8", 10), ("_linear_q8", 6)]
        need_logits = [10, 11, 12, 20, 21, 22]
        assert torch.equal(got[0, need_logits], alone[0, need_logits])


def test_a_layer_on_panels_keeps_its_fp32_weight_only_for_a_peer(many_rows):
    """On panels no pass of ours reads a layer's fp32 weight (1.4 GB of the 0.5B): it goes, unless the layer keeps
    it for a peer's calls on the same model object (``library``). Without it a prompt chunk holding an inf (which
    the many-row kernel turns away) gives NaN in that row and every other row the bits of that row alone, and a
    peer's call is refused with a clear error rather than computed from nothing; with it, a peer's call is the
    library's product of the model's own weights."""
    weight, decoded = blocks_of("Q4_K", 32, 256, seed=13)
    values = torch.from_numpy(decoded).bfloat16().float()

    def layer(library: bool) -> ExactKernelLinear:
        linear = torch.nn.Linear(256, 32, bias=True)
        with torch.no_grad():
            linear.weight.copy_(values)
        linear.gguf_weight = GgufWeight(weight.fmt, weight.data.clone(), weight.shape)
        return ExactKernelLinear(linear, many_rows, rows, int8=True, library=library)

    rows = ExactRows()
    lean, kept = layer(False), layer(True)
    assert lean.on_panels and kept.on_panels
    assert lean.dense is None and lean.weight.numel() == 0 and (lean.in_features, lean.out_features) == (256, 32)
    assert torch.equal(kept.dense.weight, values)
    x = torch.randn(1, 6, 256, generator=torch.Generator().manual_seed(14))
    x[0, 2, 7] = float("inf")
    rows.total, rows.chunks, rows.others = 6, [(0, 6)], None  # one prompt chunk of six rows
    with torch.no_grad():
        got = lean(x)
        rows.clear()
        alone = [lean(x[:, i : i + 1]) for i in range(6)]
    assert torch.isnan(got[0, 2]).all()
    assert all(torch.equal(got[:, i : i + 1], alone[i]) for i in (0, 1, 3, 4, 5))
    rows.library = True
    with torch.no_grad(), pytest.raises(RuntimeError, match="library_weights"):
        lean(x)
    y = torch.randn(3, 256, generator=torch.Generator().manual_seed(15))
    with torch.no_grad():
        assert torch.equal(kept(y), torch.nn.functional.linear(y, values, kept.dense.bias))


def test_q6_k_blocks_are_the_int8_routes_alone(gemm):
    """Q6_K blocks (kept at conversion since the int8 route reads them) are not decoded to bf16: a bf16 layer with
    them reads its bf16 weights."""
    from foretell.engine.runner import _checked_blocks

    weight, decoded = blocks_of("Q6_K", 8, 256, seed=6)
    assert gemm.int8_takes(weight) and not gemm.decodes(weight)
    assert _checked_blocks(weight, torch.from_numpy(decoded).bfloat16(), gemm) is None
    with pytest.raises(TypeError):
        gemm.dequantize(weight)


def test_on_by_default_without_amx(gemm):
    assert int8_by_default(gemm) == (not gemm.amx)
    assert int8_by_default(gemm.without_amx())
    assert not int8_by_default(None)


def test_auto_dtype_is_fp32_where_the_int8_route_takes_a_model_with_blocks(tmp_path, monkeypatch):
    """``--dtype auto`` on a CPU with native bf16 and no AMX (an AMD EPYC Zen 4: plain decoding of the 0.5B 1.8x as
    fast on the int8 route): fp32, so that exact mode's int8 route takes the layers; not for a model without GGUF
    blocks, with AMX, off the CPU, or where the route or exact mode is turned off."""
    from types import SimpleNamespace

    from foretell.engine import runner as runner_module
    from foretell.models.gguf_blocks import BLOCKS_FILE

    cpu, bf16, fp32 = torch.device("cpu"), torch.bfloat16, torch.float32
    bare, blocks = tmp_path / "bare", tmp_path / "blocks"
    bare.mkdir(), blocks.mkdir()
    (blocks / BLOCKS_FILE).write_bytes(b"")
    zen4 = SimpleNamespace(int8=True, amx=False, bf16dot=True)
    monkeypatch.setattr(cpu_gemm, "load", lambda: zen4)
    assert runner_module.int8_dtype(cpu, bf16, blocks) == fp32
    assert runner_module.int8_dtype(cpu, bf16, bare) == bf16
    assert runner_module.int8_dtype(cpu, fp32, blocks) == fp32
    assert runner_module.int8_dtype(torch.device("cuda"), bf16, blocks) == bf16
    assert runner_module.int8_dtype(cpu, bf16, blocks, int8=False) == bf16
    assert runner_module.int8_dtype(cpu, bf16, blocks, exact=False) == bf16
    monkeypatch.setattr(cpu_gemm, "load", lambda: SimpleNamespace(int8=True, amx=True, bf16dot=True))
    assert runner_module.int8_dtype(cpu, bf16, blocks) == bf16  # AMX's bf16 tiles: not measured against it
    assert runner_module.int8_dtype(cpu, bf16, blocks, int8=True) == fp32  # asked for
    monkeypatch.setattr(cpu_gemm, "load", lambda: SimpleNamespace(int8=False, amx=False, bf16dot=True))
    assert runner_module.int8_dtype(cpu, bf16, blocks, int8=True) == bf16  # no int8 products in this build


def test_an_engine_left_to_auto_on_a_bf16_cpu_serves_the_int8_route(gemm, converted, monkeypatch):
    """From the configuration down: with native bf16 and no AMX (the CPU's flags faked where it has AMX or no bf16),
    ``--dtype auto`` computes the converted model in fp32 with every layer on int8 products (loaded in bf16 and widened:
    the same tokens as loaded in fp32); asked for bf16 it keeps the
    bf16 route, and asked for bf16 with ``--int8-linears`` it refuses, naming the field (it crashed in a prompt
    chunk before)."""
    from foretell.config import ConfigError

    monkeypatch.setattr(loader, "cpu_supports_bf16", lambda: True)
    monkeypatch.setattr(cpu_gemm, "load", lambda: gemm.without_amx())

    def engine(**kwargs):
        return LLMEngine.from_config(EngineConfig(model=str(converted), device="cpu", measure_cost_curve=False,
                                                  prefill_chunk=32, **kwargs))[0]

    loaded = []
    original_load = loader.load_model
    monkeypatch.setattr(loader, "load_model", lambda path, dtype, device: loaded.append(dtype) or
                        original_load(path, dtype=dtype, device=device))
    auto = engine()
    # loaded in bf16 (the stored values) and widened but for the layers on int8 products: the start-up's peak memory
    assert loaded == [torch.bfloat16]
    assert next(auto.runner.model.parameters()).dtype == torch.float32
    assert auto.runner.int8_layers == 15
    assert not [m for m in auto.runner.model.modules() if isinstance(m, ExactKernelLinear) and m.dense is not None
                and m.dense.weight.dtype != torch.float32]
    # the same tokens as the model loaded in fp32 on the route (the tests above), prompts of one and of five chunks
    reference = LLMEngine(runner_for(converted, int8=True), loader.load_tokenizer(converted),
                          EngineConfig(measure_cost_curve=False, prefill_chunk=32))
    prompts = [[5, 6, 7], [(11 * i) % 256 for i in range(150)]]
    assert outputs(auto, [request(p, method="none") for p in prompts])[0] == \
        outputs(reference, [request(p, method="none") for p in prompts])[0]
    # without panels (as on AVX2) the layers keep the library's weights for prompt chunks: widened to fp32
    on_blocks = engine(int8_panels=False)
    kept = [m for m in on_blocks.runner.model.modules() if isinstance(m, ExactKernelLinear) and not m.head]
    assert on_blocks.runner.panel_layers == 0 and on_blocks.runner.int8_layers == 15
    assert kept and all(m.dense is not None and m.dense.weight.dtype == torch.float32 for m in kept)
    fp32_on_blocks = ModelRunner(loader.load_model(converted, torch.float32, "cpu"), exact=True, int8=True,
                                 int8_panels=False)
    reference = LLMEngine(fp32_on_blocks, loader.load_tokenizer(converted),
                          EngineConfig(measure_cost_curve=False, prefill_chunk=32))
    assert outputs(on_blocks, [request(p, method="none") for p in prompts])[0] == \
        outputs(reference, [request(p, method="none") for p in prompts])[0]
    bf16 = engine(dtype="bfloat16")
    assert next(bf16.runner.model.parameters()).dtype == torch.bfloat16 and bf16.runner.int8_layers == 0
    with pytest.raises(ConfigError, match="int8_linears"):
        engine(dtype="bfloat16", int8_linears=True)


def test_a_draft_model_runs_on_the_int8_route_where_its_target_does(gemm, converted, monkeypatch):
    """``--dtype auto`` with a draft model (here the converted model drafting for itself), the CPU's flags faked as
    a Zen 4's: the drafter is loaded and run on the int8 route as its target is (before it ran its bf16 copies
    widened per call: on a Zen 4 the packaged 0.5B's one-token pass took 86 ms there, 17.6 ms on the route), and a
    request drafting with it decodes the tokens of plain decoding, in fewer passes (the drafter is the model)."""
    monkeypatch.setattr(loader, "cpu_supports_bf16", lambda: True)
    monkeypatch.setattr(cpu_gemm, "load", lambda: gemm.without_amx())
    engine = LLMEngine.from_config(EngineConfig(model=str(converted), draft_model=str(converted), device="cpu",
                                                measure_cost_curve=False, prefill_chunk=32, k_max=8))[0]
    drafter = engine.drafter.runner
    assert drafter.exact and drafter.int8_layers == 15
    assert next(drafter.model.parameters()).dtype == torch.float32
    prompt = [(7 * i) % 256 for i in range(20)]
    (plain,), (plain_passes,) = outputs(engine, [request(prompt, method="none")])
    (drafted,), (drafted_passes,) = outputs(engine, [request(prompt, method="draft")])
    assert drafted == plain and drafted_passes < plain_passes / 2


# ------------------------------------------------------------------ a quantized GGUF, converted and served in fp32


def block_format(name: str) -> str | None:
    """The packaged Q4_K_M files' mix: Q5_0 (q, k, gate, up), Q8_0 (v, o), Q4_K and Q6_K (down)."""
    if name == "token_embd.weight" or ".attn_q." in name or ".attn_k." in name or ".ffn_up." in name \
            or ".ffn_gate." in name:
        return "Q5_0"
    if ".attn_v." in name or ".attn_output." in name:
        return "Q8_0"
    if ".ffn_down." in name:
        return "Q4_K" if name.startswith("blk.0.") else "Q6_K"
    return None


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    return convert_tiny(tmp_path_factory, "quantized-int8", block_format)


def runner_for(path, int8: bool) -> ModelRunner:
    return ModelRunner(loader.load_model(path, torch.float32, "cpu"), exact=True, int8=int8)


def test_the_layers_read_their_blocks_in_groups_with_the_bits_of_separate_calls(gemm, converted, monkeypatch):
    """Every linear layer takes the route (Q5_0, Q8_0, Q4_K and Q6_K blocks), the head too (the tied embedding's);
    q/k and gate/up run as one call each, and a pass's logits equal to the bit those of one call per layer."""
    from foretell.engine.kv_cache import SeqKV
    from foretell.engine.runner import Segment

    runners = {grouped: runner_for(converted, int8=True) for grouped in (True, False)}
    assert runners[True].int8_layers == 15
    for runner in runners.values():  # layer by layer (the one-call loop's own test is below)
        runner._lean.native = None
    names = [n for n, m in runners[True].model.named_modules() if isinstance(m, ExactKernelLinear) and m.int8 is None]
    assert names == []
    assert runners[True].model.lm_head.argmax is None  # its argmax comes from these logits
    for m in runners[False].model.modules():
        if isinstance(m, ExactKernelLinear):
            m.group = None
    groups = {id(m.group): m.group for m in runners[True].model.modules() if getattr(m, "group", None)}
    assert sorted(len(g.members) for g in groups.values()) == [2, 2, 2, 2]  # q+k and gate+up in both layers
    calls = []
    kernel = runners[True].model.lm_head.gemm
    original = kernel._linear_q8
    monkeypatch.setattr(kernel, "_linear_q8", lambda *args: calls.append(args[5]) or original(*args))
    rng = random.Random(1)
    prompt = [rng.randrange(256) for _ in range(20)]
    for n in (1, 3, 17):
        tokens = [rng.randrange(256) for _ in range(n)]
        logits, counts = {}, {}
        for grouped, runner in runners.items():
            kv = SeqKV(runner.kv_shape, 64, 64)
            runner.forward([Segment(kv, prompt, 1)])
            kv.length = len(prompt)
            calls.clear()
            logits[grouped] = runner.forward([Segment(kv, tokens, n)])[0]
            counts[grouped] = len(calls)
        assert torch.equal(logits[True], logits[False])
        assert counts[False] == 15 and counts[True] == 11  # 4 calls fewer: q+k, gate+up in each layer
        assert set(calls) == {n}


def test_predictions_are_lossless_on_the_int8_route(gemm, converted):
    """Plain decoding, then perfect, edited, garbage, empty and over-long predictions batched together: every token
    the same as plain decoding on the same route, and the perfect prediction saves passes. The route changes the
    numbers (its logits differ from the bf16 route's), so this is not a check that holds without it."""
    config = EngineConfig(max_num_seqs=8, kv_budget_tokens=16384, prefill_chunk=32, k_max=32,
                          measure_cost_curve=False, exact=True, exact_prompt_kernel_rows=8)
    engine = LLMEngine(runner_for(converted, int8=True), loader.load_tokenizer(converted), config)
    assert engine.runner.int8_layers == 15
    model = engine.runner.model
    if gemm.int8_many_rows:
        # every layer's passes on panels (the default), the many-row kernel's order; the head (a vocabulary not a
        # multiple of 16 rows) on its blocks: both kernels in one model
        assert engine.runner.panel_layers == 14
        # no fp32 weight kept for them (no pass reads it), and the embedding's values in bf16 (exactly theirs)
        panels = [m for m in model.modules() if isinstance(m, ExactKernelLinear) and m.on_panels]
        assert len(panels) == 14 and all(m.dense is None for m in panels)
        shapes = {(m.out_features, m.in_features) for m in panels}
        assert not any(tuple(p.shape) in shapes for p in (*model.parameters(), *model.buffers()))
        assert model.get_input_embeddings().weight.dtype == torch.bfloat16
    else:  # AVX2: every kernel row on linear_int8 from the blocks; prompt chunks on the library's fp32 weights
        assert engine.runner.panel_layers == 0
        layers = [m for m in model.modules() if isinstance(m, ExactKernelLinear) and not m.head]
        assert len(layers) == 14 and all(m.kernel_weight.numel() == 0 and m.dense is not None for m in layers)
    rng = random.Random(0)
    # 9 tokens: all on the kernel (8 rows before the last); 75: chunks of 32, 32 and 10 rows (gemm_int8), then the
    # last token on the kernel
    prompts = [[rng.randrange(256) for _ in range(n)] for n in (9, 75)]
    chunk_calls = []
    kernel = engine.runner.model.lm_head.gemm
    original = kernel.gemm_int8
    kernel.gemm_int8 = lambda *args, **kw: (lambda out: chunk_calls.append(out is not None) or out)(
        original(*args, **kw))
    try:
        plain, _ = outputs(engine, [request(p, method="none") for p in prompts])
    finally:
        del kernel.gemm_int8
    assert any(chunk_calls) == gemm.int8_many_rows  # the long prompt's chunks on gemm_int8 where it is built
    assert len({tuple(o) for o in plain}) == 2 and all(len(set(o)) > 3 for o in plain)
    reqs = []
    for p, out in zip(prompts, plain):
        garbage = [rng.randrange(256) for _ in range(48)]
        reqs += [request(p, out), request(p, out[:20] + [1, 2, 3] + out[23:]), request(p, garbage),
                 request(p, []), request(p, out + out)]
    native = engine.runner._lean.native
    before = native.passes
    got, passes = outputs(engine, reqs)
    assert got == [out for out in plain for _ in range(5)]
    assert max(passes[0], passes[5]) < 12
    assert native.passes > before  # decode and verify passes ran through the one-call layer loop
    # the route is really on: the bf16 route's logits for the same pass differ
    from foretell.engine.kv_cache import SeqKV
    from foretell.engine.runner import Segment

    results = []
    for int8 in (True, False):
        runner = runner_for(converted, int8=int8)
        kv = SeqKV(runner.kv_shape, 128, 128)
        results.append(runner.forward([Segment(kv, prompts[1], 4)])[0])
    assert not torch.equal(results[0], results[1])
    assert torch.allclose(results[0], results[1], atol=0.05 * results[1].abs().max().item())


@pytest.mark.parametrize("panels", [True, False])
def test_the_one_call_layer_loop_gives_the_bits_of_the_layer_by_layer_pass(gemm, converted, panels):
    """foretell_layers_q8 runs a whole pass of the layers in one call: passes of 1, 5 and 12 rows, alone and with a
    second sequence, with and without a sliding window, give the logits and write the keys and values of the
    layer-by-layer loop to the bit, the layers on panels or on their blocks. A row with a NaN makes it decline (the
    layer-by-layer pass handles those)."""
    from foretell.engine.kv_cache import SeqKV
    from foretell.engine.layer_loop import Q8LayerLoop
    from foretell.engine.runner import Segment

    runner = ModelRunner(loader.load_model(converted, torch.float32, "cpu"), exact=True, int8=True,
                         int8_panels=panels)
    assert runner.panel_layers == (14 if panels and gemm.int8_many_rows else 0)
    lean = runner._lean
    assert lean.native is not None
    rng = random.Random(2)
    prompts = [[rng.randrange(256) for _ in range(n)] for n in (20, 11)]
    for window in (None, 5):
        for layer in lean.layers:
            layer.self_attn.sliding_window = window
        lean.steps = [lean._layer_step(layer) for layer in lean.layers]
        native = Q8LayerLoop.build(lean)
        kvs = [SeqKV(runner.kv_shape, 64, 64) for _ in prompts]
        for kv, prompt in zip(kvs, prompts):
            runner.forward([Segment(kv, prompt, 1)])
            kv.length = len(prompt)
        for n in (1, 5, 12):
            for together in (False, True):
                tokens = [[rng.randrange(256) for _ in range(n + j)] for j in range(2 if together else 1)]
                results, caches = [], []
                for loop in (None, native):
                    lean.native = loop
                    passes = native.passes
                    logits = runner.forward([Segment(kv, t, len(t)) for kv, t in zip(kvs, tokens)])
                    assert native.passes == passes + (loop is not None)
                    results.append([x.clone() for x in logits])
                    caches.append([torch.cat([c[:, kv.length: kv.length + len(t)] for c in kv.keys + kv.values])
                                   for kv, t in zip(kvs, tokens)])
                assert all(torch.equal(a, b) for a, b in zip(*results))
                assert all(torch.equal(a, b) for a, b in zip(*caches))
            for kv in kvs:
                kv.length += 1  # accept one token: the next pass sees more keys (past the window)
    lean.native = native
    embeddings = lean.embed.weight
    nan_token = prompts[0][0]
    saved = embeddings[nan_token].clone()
    embeddings[nan_token] = float("nan")
    try:
        kv = SeqKV(runner.kv_shape, 64, 64)
        runner.forward([Segment(kv, prompts[1], 1)])
        kv.length = len(prompts[1])
        passes = native.passes
        logits = runner.forward([Segment(kv, [nan_token, 3], 2)])[0]
        assert native.passes == passes and torch.isnan(logits).all()
    finally:
        embeddings[nan_token] = saved


def test_a_peer_on_the_same_model_object_needs_library_weights(many_rows, converted):
    """The bench's HF peers run model.generate on the engine's model object (``library_linears``): a runner built
    with ``library_weights`` keeps its panels layers' fp32 weights for them, and a peer's pass gives the model's
    own hidden states (those of the model as loaded); a runner without them (the server's default) refuses such
    a call with a clear error instead of computing from nothing."""
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    fresh = loader.load_model(converted, torch.float32, "cpu")
    with torch.inference_mode():
        want = fresh.model(input_ids=ids, use_cache=False).last_hidden_state
    for library in (True, False):
        runner = ModelRunner(loader.load_model(converted, torch.float32, "cpu"), exact=True, int8=True,
                             library_weights=library)
        assert runner.panel_layers == 14
        with torch.inference_mode(), runner.library_linears():
            if library:
                got = runner.model.model(input_ids=ids, use_cache=False).last_hidden_state
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
            else:
                with pytest.raises(RuntimeError, match="library_weights"):
                    runner.model.model(input_ids=ids, use_cache=False)


def test_an_untied_head_on_panels_keeps_no_bf16_copy_and_decodes_losslessly(many_rows):
    """A model whose head is not its embedding (the 1.5B): the head on panels keeps no bf16 copy (no pass reads it:
    467 MB of the 1.5B), the embedding keeps its exactly-bf16 values in bf16, and plain decoding and perfect,
    edited and garbage predictions, batched, give the same tokens (a read of a dropped copy would fail here)."""
    from foretell.testing import make_tiny_model, make_tiny_tokenizer

    model = make_tiny_model(vocab_size=400, hidden_size=256, intermediate_size=512, seed=3)
    with torch.no_grad():
        embedding = model.get_input_embeddings().weight
        embedding.copy_(embedding.bfloat16().float())
        for i, linear in enumerate(m for m in model.modules() if type(m) is torch.nn.Linear):
            blocks, decoded = blocks_of("Q8_0", linear.out_features, linear.in_features, seed=20 + i)
            linear.weight.copy_(torch.from_numpy(decoded).bfloat16().float())
            linear.gguf_weight = blocks
    config = EngineConfig(max_num_seqs=8, kv_budget_tokens=16384, k_max=16, measure_cost_curve=False, exact=True)
    engine = LLMEngine(ModelRunner(model, exact=True, int8=True), make_tiny_tokenizer(), config)
    head = engine.runner.model.get_output_embeddings()
    assert engine.runner.panel_layers == 15 and head.on_panels and head.kernel_weight.numel() == 0
    assert engine.runner.model.get_input_embeddings().weight.dtype == torch.bfloat16
    rng = random.Random(4)
    prompts = [[rng.randrange(300) for _ in range(n)] for n in (7, 40)]
    plain, _ = outputs(engine, [request(p, method="none") for p in prompts])
    reqs = [r for p, out in zip(prompts, plain) for r in
            (request(p, out), request(p, out[:20] + [1, 2, 3] + out[23:]), request(p, [rng.randrange(300)] * 30))]
    got, passes = outputs(engine, reqs)
    assert got == [out for out in plain for _ in range(3)]
    assert max(passes[0], passes[3]) < 12
