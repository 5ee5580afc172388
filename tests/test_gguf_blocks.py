"""A converted GGUF's linear layers read their quantized blocks in short passes: the same bits as its bf16 weights.

foretell's CPU kernel decodes GGUF's Q8_0, Q5_0 and Q4_K blocks to bf16 (where the CPU has AVX512-BF16) and
multiplies them exactly as it multiplies stored bf16 weights. These tests check the decoder against gguf-py's
reference decoder, the products against the bf16 weights' (and that the blocks are really read), and a tiny qwen2
written as a quantized GGUF end to end: converted, loaded, its layers reading blocks, and its greedy outputs with
and without predictions equal to the same engine on its bf16 weights.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine import cpu_gemm
from foretell.engine.api import GenerationRequest
from foretell.engine.cpu_gemm import BLOCK_ROWS_MAX, GgufWeight
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import ExactKernelLinear, ModelRunner
from foretell.models import loader
from foretell.models.gguf_blocks import BLOCKS_FILE
from foretell.testing.tiny_gguf import random_blocks, write_tiny_qwen2_gguf

gguf = pytest.importorskip("gguf")
FORMATS = ["Q8_0", "Q5_0", "Q4_K"]


def has_avx512_bf16() -> bool:
    try:
        return " avx512_bf16" in open("/proc/cpuinfo").read()
    except OSError:
        return False


@pytest.fixture(scope="module")
def gemm():
    built = cpu_gemm.load()
    if built is None or not built.reads_blocks:
        assert not has_avx512_bf16(), "the CPU has AVX512-BF16, but foretell's kernel did not build to read blocks"
        pytest.skip("foretell's CPU kernel reads GGUF blocks only where the CPU has AVX512-BF16")
    return built


@pytest.fixture
def blocks_route(gemm, monkeypatch):
    """The kernel on the route where the engine reads GGUF blocks: on a CPU with AMX its layers read their bf16
    weights instead (the faster read there), so these tests take its VDPBF16PS route, as on a CPU without AMX,
    for the engines they build too."""
    if not gemm.amx:
        return gemm
    other = gemm.without_amx()
    monkeypatch.setattr(cpu_gemm, "load", lambda: other)
    return other


def blocks_of(fmt: str, rows: int, cols: int, seed: int = 0) -> tuple[GgufWeight, torch.Tensor]:
    """Random blocks of ``fmt`` and the bf16 weight gguf-py's reference decoder gives for them."""
    qtype = getattr(gguf.GGMLQuantizationType, fmt)
    if fmt in ("Q8_0", "Q5_0"):  # gguf-py quantizes these: blocks of a model-like weight
        values = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32) * 0.05
        raw = gguf.quants.quantize(values, qtype)
    else:
        raw = random_blocks(fmt, rows, cols, seed=seed)
    reference = torch.from_numpy(gguf.quants.dequantize(raw, qtype).reshape(rows, cols).copy()).to(torch.bfloat16)
    data = torch.from_numpy(np.ascontiguousarray(raw).reshape(-1).copy())
    return GgufWeight(int(qtype), data, (rows, cols)), reference


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.int16 if a.element_size() == 2 else
                                                                   torch.int32),
                                              b.contiguous().view(torch.int16 if b.element_size() == 2 else
                                                                  torch.int32))


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_kernel_decodes_each_format_as_gguf_does(gemm, fmt):
    weight, reference = blocks_of(fmt, 12, 512, seed=1)
    assert same_bits(gemm.dequantize(weight), reference)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("amx", [True, False], ids=["amx-where-present", "vdpbf16ps"])
def test_products_on_blocks_are_the_products_on_the_bf16_weights(gemm, fmt, amx):
    """Every pass size, with a bias and as rounded head logits into a kept buffer: the same bits, on AMX tiles
    where the CPU has them and on VDPBF16PS. Blocks that decode to other weights change the result of passes
    of up to BLOCK_ROWS_MAX rows (they are really read) and of none longer (those read the bf16 weights)."""
    gemm = gemm if amx else gemm.without_amx()
    weight, dense = blocks_of(fmt, 37, 512, seed=2)
    other, _ = blocks_of(fmt, 37, 512, seed=3)
    bias = torch.randn(37, generator=torch.Generator().manual_seed(0))
    out = torch.empty(16 * 37)
    for rows in range(1, 9):
        x = torch.randn(rows, 512, generator=torch.Generator().manual_seed(rows)).bfloat16()
        expected = gemm.linear(x, dense, bias)
        assert same_bits(gemm.linear(x, dense, bias, blocks=weight), expected)
        assert same_bits(gemm.logits(x, dense, out=out, blocks=weight), gemm.logits(x, dense))
        read = not same_bits(gemm.linear(x, dense, bias, blocks=other), expected)
        assert read == (rows <= BLOCK_ROWS_MAX)


def test_blocks_of_another_shape_are_refused(gemm):
    weight, dense = blocks_of("Q8_0", 8, 64)
    with pytest.raises(ValueError, match="do not hold"):
        GgufWeight(weight.fmt, weight.data[:-1].contiguous(), weight.shape)
    with pytest.raises(ValueError, match="not one of"):
        GgufWeight(2, weight.data, weight.shape)  # Q4_0: not read here
    with pytest.raises(ValueError, match="shape"):
        gemm.linear(torch.ones(1, 64).bfloat16(), dense[:4], blocks=weight)


@pytest.mark.parametrize("route", ["exact", "dispatch"])
def test_a_layer_takes_blocks_that_decode_to_its_weights_and_reads_them(gemm, blocks_route, route):
    """Exact mode's layer and the default mode's dispatching one (its plan choosing foretell's kernel) keep a
    linear's ``gguf_weight`` only where it decodes to the layer's bf16 weights, and read it for short passes;
    on AMX tiles they keep none (their bf16 weights are read)."""
    from foretell.engine.runner import ExactRows, KernelPlan, RowDispatchLinear

    def layer(blocks, gemm=blocks_route):
        linear = torch.nn.Linear(512, 37, bias=True).bfloat16()
        with torch.no_grad():
            linear.weight.copy_(dense)
        linear.gguf_weight = blocks
        if route == "exact":
            return ExactKernelLinear(linear, gemm, ExactRows())
        return RowDispatchLinear(linear, KernelPlan(kernel="foretell+bf16dot", force=True), gemm)

    weight, dense = blocks_of("Q5_0", 37, 512, seed=4)
    other, _ = blocks_of("Q5_0", 37, 512, seed=5)
    assert layer(other).blocks is None  # not its weights: ignored
    if gemm.amx:
        assert layer(weight, gemm).blocks is None
    taken = layer(weight)
    assert taken.blocks is weight
    x = torch.randn(2, 512, generator=torch.Generator().manual_seed(0)).bfloat16()
    with torch.no_grad():
        expected = taken(x)
        weight.data.copy_(other.data)  # the blocks it holds now decode to other weights
        assert not torch.equal(taken(x), expected)


# ------------------------------------------------------------------ a quantized GGUF, converted and served


def block_format(name: str) -> str | None:
    """A mix of formats as in the packaged Q4_K_M files (K-quants where the rows are 256-multiples)."""
    if name == "token_embd.weight" or ".attn_q." in name or ".attn_k." in name or ".ffn_up." in name:
        return "Q5_0"
    if name == "blk.0.ffn_gate.weight":  # as ffn_up: read with it in one call (SharedInputGroup)
        return "Q5_0"
    if ".attn_v." in name or ".attn_output." in name or ".ffn_gate." in name:
        return "Q8_0"
    if ".ffn_down." in name:
        return "Q4_K" if name.startswith("blk.0.") else "Q6_K"
    return None


def convert_tiny(tmp_path_factory, name: str, formats) -> Path:
    """A tiny qwen2 written as a GGUF with ``formats`` (tensor name -> block format or None), converted in a cache
    of its own; the converted model's directory."""
    root = tmp_path_factory.mktemp(name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FORETELL_CACHE_DIR", str(root / "cache"))
        gguf_file = root / "tiny-q.gguf"
        write_tiny_qwen2_gguf(gguf_file, hidden_size=256, intermediate_size=512, block_format=formats)
        return loader.resolve_model(str(gguf_file), progress=False).path


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    return convert_tiny(tmp_path_factory, "quantized", block_format)


def test_conversion_keeps_every_linear_layers_blocks(converted):
    from safetensors import safe_open

    with safe_open(str(converted / BLOCKS_FILE), framework="pt") as f:
        types = json.loads(f.metadata()["gguf_types"])
    assert len(types) == 2 * 7 + 1  # q, k, v, o, gate, up, down per layer, and the tied embedding
    assert types["model.embed_tokens.weight"] == int(gguf.GGMLQuantizationType.Q5_0)
    assert types["model.layers.0.mlp.down_proj.weight"] == int(gguf.GGMLQuantizationType.Q4_K)
    assert types["model.layers.1.self_attn.o_proj.weight"] == int(gguf.GGMLQuantizationType.Q8_0)
    assert types["model.layers.1.mlp.down_proj.weight"] == int(gguf.GGMLQuantizationType.Q6_K)  # the int8 route's
    assert "lm_head.weight" not in types  # the head reads the embedding's


def test_a_file_whose_blocks_cannot_be_kept_still_converts(tmp_path, monkeypatch):
    from foretell.models import default_model

    def fail(*args):
        raise NotImplementedError("unknown layout")

    monkeypatch.setattr(default_model, "save_blocks", fail)
    monkeypatch.setenv("FORETELL_CACHE_DIR", str(tmp_path / "cache"))
    gguf_file = tmp_path / "tiny-q.gguf"
    write_tiny_qwen2_gguf(gguf_file, hidden_size=256, intermediate_size=512, block_format=block_format)
    path = loader.resolve_model(str(gguf_file), progress=False).path
    assert (path / "model.safetensors").is_file() and not (path / BLOCKS_FILE).exists()
    assert json.loads((path / "foretell-source.json").read_text())["gguf_block_tensors"] == 0


def test_blocks_of_a_format_not_read_here_are_skipped_at_load(converted, tmp_path):
    """A cache written by another version may keep formats this kernel does not decode (or names this model
    lacks): loading skips them and attaches the rest."""
    import shutil

    from safetensors import safe_open
    from safetensors.torch import save_file

    from foretell.models.gguf_blocks import attach_blocks

    copy = tmp_path / "model"
    shutil.copytree(converted, copy)
    with safe_open(str(copy / BLOCKS_FILE), framework="pt") as f:
        tensors = {name: f.get_tensor(name) for name in f.keys()}
        types = json.loads(f.metadata()["gguf_types"])
    tensors["model.layers.1.mlp.down_proj.weight"] = torch.zeros(256 * 512 // 32 * 18, dtype=torch.uint8)
    types["model.layers.1.mlp.down_proj.weight"] = int(gguf.GGMLQuantizationType.Q4_0)
    tensors["model.layers.9.mlp.up_proj.weight"] = tensors["model.layers.0.mlp.up_proj.weight"].clone()
    types["model.layers.9.mlp.up_proj.weight"] = types["model.layers.0.mlp.up_proj.weight"]
    save_file(tensors, str(copy / BLOCKS_FILE), metadata={"gguf_types": json.dumps(types)})
    model = loader.load_model(copy, torch.bfloat16, "cpu")
    assert not hasattr(model.get_submodule("model.layers.1.mlp.down_proj"), "gguf_weight")
    assert attach_blocks(model, copy) == 2 * 7 + 1 - 1  # 13 layers and the tied head


def engine_for(path, blocks: bool) -> LLMEngine:
    model = loader.load_model(path, torch.bfloat16, "cpu")
    runner = ModelRunner(model, exact=True)
    layers = [m for m in runner.model.modules() if isinstance(m, ExactKernelLinear)]
    assert len(layers) == 2 * 7 + 1  # the head too
    dense = [name for name, m in runner.model.named_modules() if isinstance(m, ExactKernelLinear) and m.blocks is None]
    assert dense == ["model.layers.1.mlp.down_proj"]  # the Q6_K layer reads its bf16 weights (not decoded to bf16)
    assert not any(hasattr(m, "gguf_weight") for m in runner.model.modules())  # nothing kept twice
    if not blocks:
        for m in layers:
            m.blocks = m.group = None
    config = EngineConfig(max_num_seqs=8, kv_budget_tokens=16384, prefill_chunk=32, k_max=32,
                          measure_cost_curve=False, exact=True)
    return LLMEngine(runner, loader.load_tokenizer(path), config)


def test_siblings_that_read_one_input_take_one_call_and_give_the_same_bits(blocks_route, converted, monkeypatch):
    """q and k (Q5_0; v is Q8_0) in both layers, gate and up (Q5_0) in layer 0: passes of up to 4 rows run each
    group as one kernel call, with logits equal to the bit to those of one call per layer."""
    from foretell.engine.kv_cache import SeqKV
    from foretell.engine.runner import Segment, SharedInputGroup

    runners = {}
    for grouped in (True, False):
        runner = ModelRunner(loader.load_model(converted, torch.bfloat16, "cpu"), exact=True)
        layers = [m for m in runner.model.modules() if isinstance(m, ExactKernelLinear)]
        if not grouped:
            for m in layers:
                m.group = None
        runners[grouped] = runner
    groups = {id(m.group): m.group for m in runners[True].model.modules() if getattr(m, "group", None)}
    assert sorted(len(g.members) for g in groups.values()) == [2, 2, 2]
    assert all(isinstance(g, SharedInputGroup) for g in groups.values())
    kernel = next(m for m in runners[True].model.modules() if isinstance(m, ExactKernelLinear)).gemm
    calls = []  # kernel calls that decode blocks: VDPBF16PS's, or AMX's where this CPU has it
    decode, amx = kernel._linear_q, kernel._amx
    monkeypatch.setattr(kernel, "_linear_q", lambda *args: calls.append(args[5]) or decode(*args))
    if amx is not None:
        monkeypatch.setattr(kernel, "_amx", lambda *args: (args[2] is not None and calls.append(args[5])) or amx(*args))
    rng = random.Random(1)
    prompt = [rng.randrange(256) for _ in range(20)]
    for n in (1, 2, 3, 4, 5):
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
        if n <= BLOCK_ROWS_MAX:
            assert counts[False] - counts[True] == 3  # q+k twice, gate+up once
        else:
            assert counts[True] == counts[False] == 0  # longer passes read the bf16 weights


def request(prompt, prediction=None, method="auto") -> GenerationRequest:
    spec = SpeculationParams(prediction=None if prediction is None else tuple(prediction), method=method)
    return GenerationRequest(prompt_ids=list(prompt), max_tokens=48, sampling=SamplingParams(temperature=0.0),
                             speculation=spec, ignore_eos=True)


def outputs(engine, requests) -> tuple[list[list[int]], list[int]]:
    got = engine.generate(requests)
    return ([[t for o in got[r.request_id] for t in o.new_token_ids] for r in requests],
            [got[r.request_id][-1].stats.forward_passes for r in requests])


def test_a_quantized_gguf_decodes_the_same_tokens_on_its_blocks(blocks_route, converted):
    """Plain decoding and perfect, edited, garbage and empty predictions, batched: the engine reading the blocks
    gives every token that the same engine on the bf16 weights gives, and the predictions save passes."""
    rng = random.Random(0)
    prompts = [[rng.randrange(256) for _ in range(n)] for n in (9, 30)]
    dense = engine_for(converted, blocks=False)
    plain, _ = outputs(dense, [request(p, method="none") for p in prompts])
    assert len({tuple(o) for o in plain}) == 2 and all(len(set(o)) > 3 for o in plain)  # not a degenerate model
    reqs = [request(p, method="none") for p in prompts]
    for p, out in zip(prompts, plain):
        garbage = [rng.randrange(256) for _ in range(48)]
        reqs += [request(p, out), request(p, out[:20] + [1, 2, 3] + out[23:]), request(p, garbage),
                 request(p, [])]
    quantized = engine_for(converted, blocks=True)
    got, passes = outputs(quantized, reqs)
    expected = plain + [out for out in plain for _ in range(4)]
    assert got == expected
    assert passes[:2] == [48, 48] and max(passes[2], passes[6]) < 12  # perfect predictions: few passes


def test_on_amx_siblings_join_their_bf16_weights_and_take_one_call_in_every_pass(gemm, converted, monkeypatch):
    """On AMX tiles no layer reads blocks; q/k/v and gate/up join their bf16 weights (the layers' weights, the
    library's for prompt chunks too, become views of the joined buffer) and run as one call in passes of every
    size, with logits equal to the bit to those of one call per layer."""
    from foretell.engine.kv_cache import SeqKV
    from foretell.engine.runner import Segment

    if not gemm.amx:
        pytest.skip("this CPU has no AMX tiles (or Linux did not grant them)")
    runners = {}
    for grouped in (True, False):
        runner = ModelRunner(loader.load_model(converted, torch.bfloat16, "cpu"), exact=True)
        assert runner.block_layers == 0
        if not grouped:
            for m in runner.model.modules():
                if isinstance(m, ExactKernelLinear):
                    m.group = None
        runners[grouped] = runner
    groups = {id(m.group): m.group for m in runners[True].model.modules() if getattr(m, "group", None)}
    assert sorted(len(g.members) for g in groups.values()) == [2, 2, 3, 3]
    for group in groups.values():
        storage = group.weight.untyped_storage().data_ptr()
        for m in group.members:
            assert m.kernel_weight.untyped_storage().data_ptr() == storage
            assert m.dense.weight.data_ptr() == m.kernel_weight.data_ptr()
    amx = gemm._amx
    calls = []
    monkeypatch.setattr(gemm, "_amx", lambda *args: calls.append(args[7]) or amx(*args))
    rng = random.Random(2)
    prompt = [rng.randrange(256) for _ in range(20)]
    for n in (1, 2, 5, 17, 40):
        tokens = [rng.randrange(256) for _ in range(n)]
        logits, counts = {}, {}
        for grouped, runner in runners.items():
            kv = SeqKV(runner.kv_shape, 128, 128)
            runner.forward([Segment(kv, prompt, 1)])  # a prompt chunk: the library reads the shared weights
            kv.length = len(prompt)
            calls.clear()
            logits[grouped] = runner.forward([Segment(kv, tokens, n)])[0]
            counts[grouped] = len(calls)
        assert torch.equal(logits[True], logits[False])
        assert counts[False] - counts[True] == 2 * (2 + 1)  # per layer q+k+v in one call, gate+up in one
