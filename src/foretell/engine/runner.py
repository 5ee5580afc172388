"""Model runner: one forward pass over a packed batch of segments from many sequences.

Every running sequence contributes one *segment*: the tokens whose keys/values are not yet in its KV
(a prompt chunk, or its last token) followed by its draft. The segments are packed into a single row
(no padding), each with its own positions, and run through an unmodified transformers causal LM whose
attention is the registered function :func:`_packed_attention`: per segment it writes the new keys/values
into the sequence's own buffers at their positions and attends over that sequence's keys only. Logits are
computed only at the positions verification needs (``logits_to_keep``).

In *exact* mode (``ModelRunner(model, exact=True)``) a position's logits are bit-identical however the pass
is composed (alone, in a verify pass of any length, beside other requests): every query that needs logits
attends through the same one-query call a decode step makes, and prompt chunks attend together within
bounds the engine fixes. Linear layers: where foretell's CPU kernel builds, every row that needs logits goes
through it (it computes each row alone, in one order, whatever the number of rows) and a prompt chunk's rows
through the library GEMM, one call per chunk (:class:`ExactKernelLinear`); on a GPU every linear layer and
norm runs on blocks of a fixed number of rows (:class:`FixedRows`); elsewhere no linear layer runs on one row
(one-row GEMMs take a GEMV path that rounds differently from the GEMM every longer pass uses) and fp32 layers
run on oneDNN's GEMM. A probe at start-up checks that the rows of a GEMM do not depend on each
other with this machine's kernels; where bf16/fp16 ones do (a CPU without native bf16), those layers compute
through oneDNN's fp32 GEMM, and where nothing helps exact mode is refused (docs/EXACT.md).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from foretell.engine import cpu_gemm
from foretell.engine.cpu_gemm import CpuGemm, GgufWeight
from foretell.engine.kv_cache import KVShape, SeqKV
from foretell.engine.layer_loop import Q8LayerLoop
from foretell.models.gguf_blocks import BLOCKS_FILE, detach_blocks

ATTN_NAME = "foretell_packed"
log = logging.getLogger(__name__)


@dataclass
class Segment:
    """New tokens of one sequence, written to KV slots ``[kv.length, kv.length + len(tokens))``.
    ``num_logits`` of the last tokens need logits (draft length + 1; 0 for a mid-prompt chunk).

    A chain (``parents`` None) occupies the positions of its slots. A token *tree* gives, for each of the
    last ``len(parents)`` tokens (the draft nodes), its parent among them (-1 = the token before the
    nodes): a node sits at position (that token's position + its depth) and attends to the cache, the
    tokens before the nodes, its ancestors and itself (branches of one pass verified together).

    ``prompt_on_kernel`` (exact mode on foretell's kernel): the rows before those that need logits are computed
    as those are, each row alone on the kernel (linear layers and attention), so their bits do not depend on the
    chunk's bounds; otherwise they are a prompt chunk on the library GEMM."""

    kv: SeqKV
    tokens: list[int]
    num_logits: int
    parents: list[int] | None = None
    prompt_on_kernel: bool = False
    argmax_only: bool = False  # its caller reads only each logits row's argmax (greedy, no logprobs, bias, penalty)

    @property
    def library_rows(self) -> int:
        """Leading rows computed as one prompt chunk on the library GEMM (exact mode; 0 on the kernel)."""
        return 0 if self.prompt_on_kernel else len(self.tokens) - self.num_logits

    def positions(self) -> list[int]:
        """The position (for RoPE) of each token."""
        start, n = self.kv.length, len(self.tokens)
        if self.parents is None:
            return list(range(start, start + n))
        base = start + n - len(self.parents) - 1  # position of the token before the nodes
        depth: list[int] = []
        for parent in self.parents:
            depth.append(1 if parent < 0 else depth[parent] + 1)
        return list(range(start, base + 1)) + [base + d for d in depth]


class _PackedBatch:
    """Passed to the attention function through the model's kwargs for one forward pass."""

    def __init__(self, segments: list[Segment], exact: bool = False, kernel: CpuGemm | None = None,
                 kernel_chunks: bool = True):
        self.segments = segments
        self.exact = exact
        self.kernel = kernel  # foretell's CPU attention for the queries that need logits (None: SDPA)
        self.kernel_chunks = kernel is not None and kernel_chunks  # and for a prompt chunk's queries
        self.starts = [s.kv.length for s in segments]
        # the sequences' tiled keys (SeqKV.tiles): valid before this pass's keys, which every layer's call adds
        self.tiles_valid = []
        for s, start in zip(segments, self.starts):
            s.kv.tiles_valid = min(s.kv.tiles_valid, start)
            self.tiles_valid.append(s.kv.tiles_valid)
        self.tiled = [bool(s.kv.tiles) and s.parents is None and self.kernel_chunks for s in segments]
        offsets, off = [], 0
        for s in segments:
            offsets.append(off)
            off += len(s.tokens)
        self.offsets = offsets
        self.total = off
        self._masks: dict[tuple, tuple] = {}  # per (segment, window, kind): built once per pass, not per layer

    def mask(self, i: int, window: int | None, device) -> tuple[int, torch.Tensor | None]:
        """Segment i's (first key, mask), built once per forward pass and window size, not per layer."""
        key = (i, window)
        if key not in self._masks:
            seg = self.segments[i]
            if seg.parents is None:
                self._masks[key] = _segment_mask(self.starts[i], len(seg.tokens), window, device)
            else:
                self._masks[key] = _tree_mask(self.starts[i], len(seg.tokens), seg.parents, window, device)
        return self._masks[key]

    def query_keys(self, i: int, window: int | None, count: int) -> tuple[list[int], list[int]]:
        """(first, end) key of each of the last ``count`` queries of chain segment i: it sees keys [first, end)."""
        key = (i, window, "keys", count)
        if key not in self._masks:
            seg, start = self.segments[i], self.starts[i]
            ends = list(range(start + len(seg.tokens) - count + 1, start + len(seg.tokens) + 1))
            self._masks[key] = ([0 if not window else max(0, end - window) for end in ends], ends)
        return self._masks[key]

    def keys_tiled(self) -> None:
        """After a pass whose every layer ran: the tiled keys hold this pass's keys too."""
        for seg, start, tiled in zip(self.segments, self.starts, self.tiled):
            if tiled:
                seg.kv.tiles_valid = start + len(seg.tokens)

    def chunk_mask(self, i: int, n: int, window: int | None, device) -> tuple[int, torch.Tensor | None]:
        """(first key, causal mask) for the first ``n`` tokens of segment i (exact mode's prompt chunk)."""
        key = (i, window, "chunk")
        if key not in self._masks:
            self._masks[key] = _segment_mask(self.starts[i], n, window, device)
        return self._masks[key]


def _segment_mask(start: int, n: int, window: int | None, device) -> tuple[int, torch.Tensor | None]:
    """First key position to attend and the boolean mask for queries at ``start..start+n-1``.

    Causal; with a sliding ``window`` a query at q sees keys k with q - window < k <= q (transformers'
    convention). A single query needs no mask: slicing the keys is enough.
    """
    first = 0 if not window else max(0, start + 1 - window)
    if n == 1:
        return first, None
    q_pos = start + torch.arange(n, device=device)[:, None]
    k_pos = torch.arange(first, start + n, device=device)[None, :]
    mask = k_pos <= q_pos
    if window:
        mask &= k_pos > q_pos - window
    return first, mask


def _tree_mask(start: int, n: int, parents: list[int], window: int | None, device) -> tuple[int, torch.Tensor]:
    """(0, mask) for a segment whose last ``len(parents)`` tokens form a tree (see :class:`Segment`)."""
    if window:
        raise ValueError("token trees are not supported with sliding-window attention")
    _, mask = _segment_mask(start, n, None, device)  # causal over the slots, then the tree's own rule
    nodes = len(parents)
    first = n - nodes  # row of the first node; slots start + first ...
    visible = torch.zeros(nodes, nodes, dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            visible[i] = visible[parent]
        visible[i, i] = True
    mask[first:, start + first:] = visible.to(device)
    return 0, mask


def _packed_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """query [1, H, T, D]; key/value [1, Hkv, T, D] for the packed new tokens (RoPE applied).

    Without a packed batch (the model called normally, e.g. ``model.generate``) it is plain SDPA.
    """
    batch: _PackedBatch | None = kwargs.pop("foretell_batch", None)
    if batch is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    for name in _UNSUPPORTED_KWARGS:  # never ignore what changes the attention (ModelRunner refuses it first)
        if kwargs.get(name) is not None:
            raise UnsupportedModelError(f"the packed attention does not implement {_UNSUPPORTED_KWARGS[name]}")
    window = kwargs.get("sliding_window")
    layer = module.layer_idx
    outputs = []
    for i, (seg, start, off) in enumerate(zip(batch.segments, batch.starts, batch.offsets)):
        n = len(seg.tokens)
        keys, values = seg.kv.keys[layer], seg.kv.values[layer]
        keys[:, start : start + n] = key[0, :, off : off + n]
        values[:, start : start + n] = value[0, :, off : off + n]
        if seg.parents is not None and batch.exact:
            raise ValueError("exact mode verifies chains only (no token trees)")
        if seg.parents is None and (batch.exact or batch.kernel is not None):
            outputs += _chain_attention(batch, i, layer, query[:, :, off : off + n], keys, values, window, scaling)
            continue
        first, mask = batch.mask(i, window, query.device)
        outputs.append(_attend(query[:, :, off : off + n], keys[None, :, first : start + n],
                               values[None, :, first : start + n], mask, scaling))
    out = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=2)
    return out.transpose(1, 2).contiguous(), None


# On CUDA, PyTorch (2.11 here) picks cuDNN's attention for bf16 on Hopper, which builds a graph for each new
# shape; a decode step's key length is new at every step, so every step paid the build: the 0.5B decoded at
# 94 ms per token in bf16 on an H100 against 31 ms once the shapes had been seen, 15.2 ms with cuDNN's backend
# off (benchmarks/results/gpu-2026-11-25-h100, docs/GPU.md).
# FlashAttention (no mask), memory-efficient attention (with a mask) and the math kernel have no such cost.
CUDA_SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


def attention_backends(device: torch.device):
    """The SDPA backends the packed attention may use on ``device`` (a context manager): on CUDA all but
    cuDNN's (see ``CUDA_SDPA_BACKENDS``); elsewhere PyTorch's choice."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, name) for name in CUDA_SDPA_BACKENDS])


PACKED_GQA_QUERIES = 8  # segments of at most this many queries attend with the query heads packed per KV head


def _attend(query, key, value, mask: torch.Tensor | None, scaling) -> torch.Tensor:
    """SDPA for one segment: query [1, H, n, D], key/value [1, Hkv, L, D], mask [n, L] or None -> [1, H, n, D].

    With grouped-query attention (H = Hkv * r) and few queries, the r query heads that share a KV head become
    r * n rows of one query block for that head, as transformers' ``pack_gqa`` does for decoding: each KV head
    is read once for all its query heads. Measured on a 2-core Xeon (fp32, per layer, 5,000 keys): one query
    0.37 ms against 0.71 with ``enable_gqa`` (1.5B shapes: 0.42 against 1.26), eight queries 1.41 against 1.64;
    from 16 queries ``enable_gqa`` is as fast or faster. Each query's result is computed by the same call
    shape whether it is decoded alone or verified in exact mode (one query per call there)."""
    heads, kv_heads, n, dim = query.shape[1], key.shape[1], query.shape[2], query.shape[3]
    rep = heads // kv_heads
    if rep == 1 or n > PACKED_GQA_QUERIES:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling, enable_gqa=rep > 1)
    packed = query.reshape(1, kv_heads, rep * n, dim)  # head h = j * rep + r -> KV head j, rows (r, query)
    out = F.scaled_dot_product_attention(packed, key, value, attn_mask=None if mask is None else mask.repeat(rep, 1),
                                         scale=scaling)
    return out.reshape(1, heads, n, dim)


def _chain_attention(batch: _PackedBatch, i: int, layer: int, query, keys, values, window,
                     scaling) -> list[torch.Tensor]:
    """Attention of chain segment i (``query`` [1, H, n, D], its cache ``keys``/``values`` [Hkv, cap, D] with the
    new tokens written), each query over the keys it may see in a computation that does not depend on what else
    is in the pass. With foretell's CPU attention for chunks too (``kernel_chunks``), every query of the segment
    in one call (each computed alone, in a fixed order): it attends a prompt chunk 2.6-3.9x faster than SDPA
    with a causal mask (512 queries after 0-3,584 keys, the 0.5B's and the 1.5B's heads, bf16, 2-core AMD EPYC).
    Otherwise the queries before those that need logits (a prompt chunk) attend together through SDPA, and each
    query that needs logits (a decode token, a draft) through the kernel (one call for them all), else in exact
    mode in an SDPA call of its own, exactly as in a one-token decode step (SDPA blocks and reduces differently
    for different numbers of queries and with a mask); a chunk's result then depends only on its bounds, which
    the exact-mode scheduler fixes (chunks never cross a multiple of the prefill chunk size). On bf16 with AMX
    SDPA is the faster (:func:`sdpa_is_faster`): the kernel serves exact mode's logit rows there only."""
    seg, start = batch.segments[i], batch.starts[i]
    n = query.shape[2]
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if batch.kernel_chunks:
        firsts, ends = batch.query_keys(i, window, n)
        tiles = seg.kv.tiles[layer] if batch.tiled[i] else None
        return [batch.kernel.attention(query[0], keys, values, firsts, ends, scale, tiles, batch.tiles_valid[i])[None]]
    chunk = seg.library_rows
    outputs = []
    if chunk > 0:
        first, mask = batch.chunk_mask(i, chunk, window, query.device)
        outputs.append(_attend(query[:, :, :chunk], keys[None, :, first : start + chunk],
                               values[None, :, first : start + chunk], mask, scaling))
    firsts, ends = batch.query_keys(i, window, n - chunk)
    if batch.kernel is not None and ends:
        outputs.append(batch.kernel.attention(query[0, :, chunk:], keys, values, firsts, ends, scale)[None])
        return outputs
    for j, (first, end) in enumerate(zip(firsts, ends), start=chunk):
        outputs.append(_attend(query[:, :, j : j + 1], keys[None, :, first:end], values[None, :, first:end],
                               None, scaling))
    return outputs


_UNSUPPORTED_KWARGS = {"softcap": "attention logit soft-capping", "s_aux": "attention sinks"}


class UnsupportedModelError(ValueError):
    """The model needs an attention feature the packed attention does not implement."""


def unsupported_attention(model) -> str | None:
    """What the packed attention would get wrong for this model (None = nothing): it implements causal
    attention with GQA and sliding windows, not soft-capped attention logits (Gemma 2) or sinks (gpt-oss)."""
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if getattr(cfg, "attn_logit_softcapping", None) is not None:
        return "attention logit soft-capping (attn_logit_softcapping)"
    if any(getattr(m, "sinks", None) is not None for m in model.modules()):
        return "attention sinks"
    return None


AttentionInterface.register(ATTN_NAME, _packed_attention)
AttentionMaskInterface.register(ATTN_NAME, sdpa_mask)  # used only when the model is called normally


def _swap_linears(model, make, also=lambda child: False) -> int:
    """Replace every plain ``nn.Linear`` in ``model`` (and every module ``also`` accepts) by ``make(module)``
    (kept where that returns None); how many."""
    swapped = 0
    with torch.no_grad():
        for module in list(model.modules()):
            for name, child in list(module.named_children()):
                if (type(child) is torch.nn.Linear or also(child)) and (layer := make(child)) is not None:
                    setattr(module, name, layer)
                    swapped += 1
    return swapped


def prepack_cpu_linears(model) -> int:
    """Swap fp32 ``nn.Linear`` layers on the CPU for oneDNN ones with pre-packed weights.

    On AVX2-only CPUs, MKL's GEMM for a few rows (a small draft) repacks the weights on every call and costs
    ~2× a one-row GEMV; with weights packed once, a 1-token pass is ~20% faster and an 8-token pass costs
    ~2× one token instead of ~2.5×. Returns how many layers were swapped (0 where it does not apply).
    """
    param = next(model.parameters())
    if param.device.type != "cpu" or param.dtype != torch.float32 or not torch.backends.mkldnn.is_available():
        return 0
    from torch.utils.mkldnn import MkldnnLinear

    return _swap_linears(model, lambda child: MkldnnLinear(child, torch.float32))


Shape = tuple[int, int]  # a linear layer's (in_features, out_features)


@dataclass
class KernelPlan:
    """Which GEMM the CPU runs for a pass of n rows (fp32; bf16 alike, the library's being oneDNN's there),
    shared by every :class:`RowDispatchLinear` of one model:
    the alternative kernel (``kernel``: oneDNN's packed GEMM, or foretell's) where the layer's packed sizes
    (``by_shape`` for its shape, else ``packed_at``) hold the largest of ``sizes`` that is <= n, MKL's
    otherwise. The start-up cost measurement runs whole passes with each kernel at each size, times every
    layer call in them, and keeps per layer shape and size the faster kernel
    (:func:`foretell.engine.cost.measure_cost_points`); passes larger than any measured size run on MKL
    (packed GEMMs of 260-640 rows spiked to 1.5x MKL's time on the Xeon below, at sizes a few probes miss: a
    380-token prompt plus a 26-token draft took 1.78 s instead of 1.22).

    Per shape, because the kernels rank differently by shape. On a 2-core Intel Xeon with AVX-512 (no AMX),
    0.5B, in whole passes: MKL for 2-3 rows everywhere; from 4 rows packed for the MLP and the output head (a
    151936 x 896 head: 32 ms packed vs 41 ms MKL at 4 rows, but 22 vs 32 ms at 2 rows) while the attention
    projections stay on MKL at every size (oneDNN's per-call overhead: 24 q projections of 896 x 896 took 6.8
    ms packed vs 4.3 ms MKL at 4 rows); one plan for all layers cost 3-5% more at 4-8 rows. ``packed_at`` is
    what a shape measured nothing for gets (the default: packed from 4 rows)."""

    sizes: tuple[int, ...] = (1, 4, 257)
    packed_at: frozenset[int] = frozenset({4})
    by_shape: dict[Shape, frozenset[int]] = field(default_factory=dict)
    kernel: str = "packed"  # the alternative to MKL: "packed" (oneDNN), "foretell" (cpu_gemm), "foretell+bf16[+fp32]"
    force: bool | None = None  # while measuring: every call packed (True) or MKL (False)
    timings: dict[Shape, float] | None = None  # while measuring: seconds of this pass's calls, per layer shape

    def packed(self, rows: int, shape: Shape | None = None) -> bool:
        if self.force is not None:
            return self.force
        size = self.sizes[max(bisect.bisect_right(self.sizes, rows) - 1, 0)]
        return size in self.by_shape.get(shape, self.packed_at)

    def choose(self, mkl: dict[int, float], packed: dict[int, float],
               shapes: dict[Shape, tuple[dict[int, float], dict[int, float]]] | None = None) -> None:
        """Keep, per measured size, the kernel whose pass was faster (seconds per size), and per layer shape
        in ``shapes`` (its calls' seconds per size with MKL, with packed) the faster kernel for that shape."""
        by_shape = {shape: frozenset(n for n in m if p[n] < m[n]) for shape, (m, p) in (shapes or {}).items()}
        self.adopt(mkl, frozenset(n for n in mkl if packed[n] < mkl[n]), by_shape)

    def adopt(self, measured: Sequence[int], packed_at: frozenset[int],
              by_shape: dict[Shape, frozenset[int]] | None = None) -> None:
        """Packed at ``packed_at`` (a subset of the ``measured`` sizes; per shape ``by_shape``), MKL beyond
        the largest measured size."""
        top = max(measured)
        self.sizes, self.packed_at = (*sorted(measured), top + 1), frozenset(packed_at)
        self.by_shape = dict(by_shape or {})

    def describe(self) -> str:
        def one(at: frozenset[int]) -> str:
            return ", ".join(f"{n}: {self.kernel if n in at else 'MKL'}" for n in self.sizes[:-1]) + \
                f", >{self.sizes[-1] - 1}: MKL"
        return "; ".join([f"default {one(self.packed_at)}"] +
                         [f"{i}x{o} {one(at)}" for (i, o), at in sorted(self.by_shape.items())])


class _WidenedLinear(torch.nn.Module):
    """A linear layer that keeps only bf16 weights (exact copies of fp32 ones) and runs MKL's GEMM on them
    widened to fp32 for each call: the large passes (prefill) of a :class:`RowDispatchLinear` whose small ones
    run foretell's kernel on the bf16 weights (``--cpu-linears lean``). Widening made a 938-token prefill of
    the 0.5B 6% slower on the Xeon below (2.95 vs 2.77 s); not keeping the fp32 copy saves ~1.4 GB there."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.register_buffer("weight", weight)  # a buffer: the model's parameters keep its compute dtype
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight.float(), self.bias)


class _NarrowEmbedding(torch.nn.Module):
    """An input embedding that keeps only bf16 rows (exact copies of fp32 ones) and widens those it looks up."""

    def __init__(self, weight: torch.Tensor, padding_idx: int | None):
        super().__init__()
        self.register_buffer("weight", weight)  # a buffer: the model's parameters keep its compute dtype
        self.padding_idx = padding_idx

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(ids, self.weight, self.padding_idx).float()


class RowDispatchLinear(torch.nn.Module):
    """An fp32 (or bf16: see :func:`_bf16_dispatch`) linear layer on the CPU with two kernels, the library's GEMM
    (MKL in fp32, oneDNN in bf16) on the dense weight or an alternative
    (``packed``): foretell's own GEMM on the same weight (:mod:`foretell.engine.cpu_gemm`) where it builds,
    else oneDNN's GEMM on a copy packed once; each call takes the one its model's :class:`KernelPlan` names
    for the call's rows and the layer's shape. The measurements below compare MKL with oneDNN (before
    foretell's kernel, which beats both from 4 rows: see its module).

    Measured on a 2-core Intel Xeon with AVX-512 (no AMX), whole 0.5B model: oneDNN packed is ~1.2x slower
    than MKL for 1-3 rows (MKL: 95 ms for 1-3 rows, packed 111-151 ms) but faster from 4 rows (156 vs 169 ms
    at 4, 167 vs 214 at 8: MKL's small-M GEMM repacks the weights on every call); at 256-512 rows they are
    within 5%. On AVX2-only CPUs packed was faster at every size tried. The cost is a second copy of the
    layer's weights (none for an output head tied to the input embedding: the dense copy is the embedding).
    Timing layers alone (weights hot in cache) chose differently from whole passes, hence the plan is measured
    in whole passes.

    With ``narrowed`` (the weight as bf16, every value exact) foretell's kernel reads that copy (1.4-1.9x faster
    than from fp32 for 1-4 rows on the 0.5B's matrices) and MKL the fp32 weight (``keep_dense``) or the bf16 one
    widened per call (:class:`_WidenedLinear`: no fp32 copy, prefill ~6% slower). The outputs are the same bits
    as with the fp32 weight.
    """

    def __init__(self, linear: torch.nn.Linear, plan: KernelPlan, gemm: CpuGemm | None = None,
                 narrowed: torch.Tensor | None = None, keep_dense: bool = False):
        super().__init__()
        self.dense: torch.nn.Module = linear
        self.kernel_args: tuple[CpuGemm, torch.Tensor, torch.Tensor | None] | None = None  # foretell's kernel's
        if gemm is not None and narrowed is not None:  # foretell's kernel reads the bf16 copy (half the bytes);
            # MKL the fp32 weight (keep_dense) or the bf16 one widened per call
            self.dense = linear if keep_dense else _WidenedLinear(narrowed, linear.bias)
            self.kernel_args = (gemm, narrowed, linear.bias)
        elif gemm is not None:  # foretell's kernel on the dense weight: no second copy
            self.kernel_args = (gemm, linear.weight, linear.bias)
        # a converted GGUF's blocks, which the kernel reads for short bf16 passes (the same bits)
        self.blocks = None if self.kernel_args is None else _checked_blocks(
            getattr(linear, "gguf_weight", None), self.kernel_args[1], gemm)
        if self.kernel_args is not None:
            self.packed = functools.partial(gemm.linear, weight=self.kernel_args[1], bias=linear.bias,
                                            **({} if self.blocks is None else {"blocks": self.blocks}))
        else:
            from torch.utils.mkldnn import MkldnnLinear

            self.packed = MkldnnLinear(linear, torch.float32)
        self.plan = plan
        self.shape: Shape = (linear.in_features, linear.out_features)
        self.keep_logits = False  # an output head: float32 logits into kept buffers (see logits)
        self._kept = (_Scratch(), _Scratch())  # the float32 logits and the library's bf16 result (empty until used)

    @property
    def weight(self) -> torch.Tensor:
        """The layer's weight as MKL reads it: fp32, or bf16 where only that copy is kept."""
        return self.dense.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if self.keep_logits and rows * self.shape[1] * 4 <= HEAD_BUFFER_BYTES:
            out, scratch = self._kept
            return self.logits(x.reshape(rows, x.shape[-1]), out(rows * self.shape[1], torch.float32),
                               scratch).view(*x.shape[:-1], self.shape[1])
        kernel = self.packed if self.plan.packed(rows, self.shape) else self.dense
        return self._timed(kernel, x)

    def logits(self, x: torch.Tensor, out: torch.Tensor, scratch: _Scratch) -> torch.Tensor:
        """``forward(x).float()`` for a 2-D ``x``, bit for bit, written into the float32 buffer ``out``; the kernel
        is the one ``forward`` would take. An output head does this while ``keep_logits`` is set (by the runner,
        for passes whose caller takes the logits before the next pass: the engine's step): its logits then live
        in buffers kept across passes, float32 and, for the library's bf16 GEMM, bf16 (``scratch``). Otherwise a
        long verify pass gets a fresh bf16 result and a fresh float32 copy, which glibc maps anew above 32 MB and
        whose pages fault in on every pass: 128 rows of a 152k vocabulary are 39 + 78 MB."""
        if not self.plan.packed(x.shape[0], self.shape):
            return self._timed(functools.partial(linear_logits, self.dense, out=out, scratch=scratch), x)
        if self.kernel_args is None:
            return self._timed(functools.partial(linear_logits, self.packed, out=out, scratch=scratch), x)
        gemm, weight, bias = self.kernel_args
        blocks = {} if self.blocks is None else {"blocks": self.blocks}
        return self._timed(functools.partial(gemm.logits, weight=weight, bias=bias, out=out, **blocks), x)

    def _timed(self, kernel, x: torch.Tensor) -> torch.Tensor:
        timings = self.plan.timings
        if timings is None:
            return kernel(x)
        start = time.perf_counter()
        y = kernel(x)
        timings[self.shape] = timings.get(self.shape, 0.0) + time.perf_counter() - start
        return y


HEAD_BUFFER_BYTES = 256 << 20  # the most an output head keeps as a logits buffer (RowDispatchLinear, ExactKernelLinear)


class _Scratch:
    """Buffers kept across calls, one per dtype, grown to the largest size asked for."""

    def __init__(self):
        self._buffers: dict[torch.dtype, torch.Tensor] = {}

    def __call__(self, size: int, dtype: torch.dtype) -> torch.Tensor:
        buffer = self._buffers.get(dtype)
        if buffer is None or buffer.numel() < size:
            buffer = self._buffers[dtype] = torch.empty(size, dtype=dtype)
        return buffer[:size]


def linear_logits(layer: torch.nn.Module, x: torch.Tensor, out: torch.Tensor, scratch: _Scratch) -> torch.Tensor:
    """``layer(x).float()`` for a 2-D ``x``, bit for bit, as a view of the float32 buffer ``out``. A plain fp32 or
    bf16 ``nn.Linear`` runs the GEMM that ``F.linear`` runs (``mm``/``addmm``) into ``out`` (bf16: into a kept bf16
    buffer, then widened into ``out``), so neither result is a fresh allocation; other layers are called and
    their result copied in."""
    own = type(layer) is torch.nn.Linear and layer.weight.dtype == x.dtype in (torch.float32, torch.bfloat16)
    if not own:
        result = layer(x)
        return out[: result.numel()].view(result.shape).copy_(result)
    weight = layer.weight
    y = out[: x.shape[0] * weight.shape[0]].view(x.shape[0], weight.shape[0])
    target = y if x.dtype == torch.float32 else scratch(y.numel(), x.dtype).view(y.shape)
    if layer.bias is None:
        torch.mm(x, weight.t(), out=target)
    else:
        torch.addmm(layer.bias, x, weight.t(), out=target)
    return y if target is y else y.copy_(target)


def row_dispatch_cpu_linears(model, own_gemm: bool = False, lean: bool = False) -> KernelPlan | None:
    """Swap fp32 ``nn.Linear`` layers on the CPU (the output head too) for :class:`RowDispatchLinear` layers
    sharing one :class:`KernelPlan` (returned; None where it does not apply: not fp32 or bf16 on a CPU, no
    oneDNN; bf16 only with foretell's kernel, on the layers' own weights: :func:`_bf16_dispatch`).
    The alternative to MKL is foretell's kernel (:mod:`foretell.engine.cpu_gemm`) with ``own_gemm`` where it
    builds, else oneDNN's pre-packed GEMM.

    With foretell's kernel, layers whose weights are all exactly bf16 (the packaged models: converted to bf16,
    computed in fp32) get a bf16 copy for it; MKL keeps the fp32 weights (plan kernel ``foretell+bf16+fp32``)
    or, with ``lean``, gets the bf16 ones widened per call (``foretell+bf16``: one copy). The output head runs
    a few rows per pass (only the positions that need logits), so it keeps only the bf16 copy either way, as
    does the input embedding (widened where looked up), shared with a tied head."""
    param = next(model.parameters())
    if param.device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return None
    if param.dtype == torch.bfloat16:  # a bf16 model: the library's bf16 GEMM or foretell's on the same weights
        gemm = cpu_gemm.load() if own_gemm else None
        return None if gemm is None else _bf16_dispatch(model, gemm)
    if param.dtype != torch.float32:
        return None
    gemm = cpu_gemm.load() if own_gemm else None
    plan = KernelPlan(kernel="foretell" if gemm is not None else "packed")
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    tied = head is not None and embedding is not None and head.weight is embedding.weight
    narrow_embedding = None
    if gemm is not None and type(embedding) is torch.nn.Embedding:
        narrow_embedding = cpu_gemm.exact_bf16(embedding.weight)
        if narrow_embedding is not None:
            model.set_input_embeddings(_NarrowEmbedding(narrow_embedding, embedding.padding_idx))
    narrowed = []

    def dispatch(child: torch.nn.Linear) -> RowDispatchLinear:
        narrow = None
        if gemm is not None:  # a head tied to the embedding shares its bf16 copy
            narrow = narrow_embedding if child is head and tied else cpu_gemm.exact_bf16(child.weight)
        narrowed.append(narrow is not None)
        return RowDispatchLinear(child, plan, gemm, narrow, keep_dense=not lean and child is not head)

    _swap_linears(model, dispatch)
    if any(narrowed):
        plan.kernel = "foretell+bf16" if lean else "foretell+bf16+fp32"
    return plan


def _bf16_dispatch(model, gemm: CpuGemm) -> KernelPlan:
    """bf16 layers on the CPU: the library's bf16 GEMM (oneDNN) or foretell's kernel on the same weights (no
    copy), by layer shape and pass size as the plan measures. On a 2-core AMD EPYC with AVX512-BF16 the kernel's
    VDPBF16PS path took 0.37 ms against oneDNN's 0.60 for one row of the 0.5B's MLP matrix (4864 x 896), 0.83
    against 0.91 for 16, and lost from ~64 rows (2.24 against 1.87)."""
    plan = KernelPlan(kernel="foretell+amx" if gemm.amx else "foretell+bf16dot" if gemm.bf16dot
                      else "foretell+bf16widened")
    _swap_linears(model, lambda child: RowDispatchLinear(child, plan, gemm))
    return plan


class ExactModeUnavailable(RuntimeError):
    """This machine's GEMM kernels give a row a result that depends on the other rows of the pass."""


@dataclass
class ExactRows:
    """How exact mode's linear layers split the current pass (set by :meth:`ModelRunner.forward`): the rows of
    each prompt chunk, ``(first row, count)``, and the index of every other row; ``total`` rows in all. Empty
    outside a packed pass (a probe, ``model.generate``): every row is then an other row."""

    total: int = 0
    chunks: list[tuple[int, int]] = field(default_factory=list)
    others: torch.Tensor | None = None
    library: bool = False  # every row on the library GEMM (a peer's model.generate on the same model object)
    reuse_logits: bool = False  # this pass's caller takes its logits before the next pass (the head's buffer)
    argmax_only: bool = False  # every segment's caller reads only its rows' argmax (an ArgmaxHead may serve them)
    glue: bool = True  # exact mode's layer glue runs on the kernel (GlueRMSNorm, GlueMLP, LeanDecoder._rope); False:
    # what they replaced (torch's modules and ops), as with ``--no-layer-glue`` but switchable in one process for A/Bs

    def fill(self, segments: list[Segment], reuse_logits: bool = False) -> None:
        """Split the pass of ``segments``: each one's rows before those that need logits are a prompt chunk."""
        self.reuse_logits = reuse_logits
        with_logits = [seg for seg in segments if seg.num_logits]  # a mid-prompt chunk has no rows in the head
        self.argmax_only = bool(with_logits) and all(seg.argmax_only for seg in with_logits)
        chunks, others, row = [], [], 0
        for seg in segments:
            chunk = seg.library_rows
            if chunk > 0:
                chunks.append((row, chunk))
            others.extend(range(row + max(chunk, 0), row + len(seg.tokens)))
            row += len(seg.tokens)
        self.total, self.chunks = row, chunks
        self.others = torch.tensor(others, dtype=torch.long) if others and chunks else None

    def clear(self) -> None:
        self.total, self.chunks, self.others, self.reuse_logits, self.argmax_only = 0, [], None, False, False


class ExactKernelLinear(torch.nn.Module):
    """Exact mode's linear layer where foretell's CPU kernel builds (:func:`exact_kernel_linears`).

    The kernel computes each row alone, in one fixed order, whatever the number of rows (one row included), so
    every row that needs logits (a decode token, a draft token, a prompt's last token) goes through it and gets
    the same bits in any pass. The rows of a prompt chunk (the positions before those) go through the library
    GEMM of the model's dtype, one call per chunk: their result depends on the chunk's bounds only, which the
    exact-mode scheduler derives from the prompt alone, so long prompts keep the library's speed where it is
    faster; a chunk the scheduler marks ``prompt_on_kernel`` (short ones, or all where the kernel runs on AMX
    tiles) goes through the kernel with the other rows. bf16 layers compute the kernel's rows with VDPBF16PS where the CPU has AVX512-BF16 (else in fp32
    from the bf16 weights), fp16 ones in fp32 from widened weights; each output is rounded once back.
    ``dense`` None (the output head, which sees only rows that need logits): the kernel only, on a bf16 copy
    where the weights are exactly bf16. Inside a pass the head writes float32 logits, each rounded to the
    model's bf16 in the kernel: the values a bf16 head gives, without its bf16 copy and the caller's float32
    copy of that. Where the pass's caller reuses logits (the engine's step), they go into a buffer kept across
    passes (up to ``HEAD_BUFFER_BYTES``), so a long verify pass does not fault in a fresh 78 MB for 128 rows of
    a 152k vocabulary; they are then valid until the next pass."""

    def __init__(self, linear: torch.nn.Linear, gemm: CpuGemm, rows: ExactRows, keep_dense: bool = True,
                 int8: bool = False, panels: bool = True, library: bool = False):
        super().__init__()
        self.head = not keep_dense  # the output head: it sees only rows that need logits
        weight = linear.weight.detach()
        self.dense = linear if keep_dense else None
        bias = None if linear.bias is None else linear.bias.detach().float()
        self.register_buffer("kernel_bias", bias, persistent=False)
        self.gemm = gemm
        self.rows = rows
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self._head_out = _Scratch()  # the head's logits buffer, reused pass after pass
        # int8 products on the GGUF blocks for the kernel's rows (_int8_blocks): llama.cpp's numerics, laid out once
        # as panels (CpuGemm.panels) where they can be: every pass, one row or many, on the many-row kernel's tiles;
        # the file's blocks then go (not kept beside them)
        self.int8 = _int8_blocks(getattr(linear, "gguf_weight", None), weight, gemm) if int8 else None
        laid_out = gemm.panels(self.int8) if self.int8 is not None and panels else None
        if laid_out is not None:
            self.int8 = laid_out
            del linear.gguf_weight
        if laid_out is not None and not self.head:
            # every kernel row runs on the panels: no pass reads a bf16 copy of the weight (none is made: an empty
            # one in its place, so that a read by mistake fails rather than computes), nor the library's fp32
            # weight, but a peer's calls on the same model object (``library``: ExactRows.library); without it a
            # prompt chunk with an inf or NaN takes the panels' row by row kernel (NaN in those rows). (An output
            # head keeps its copy: it is its ``weight``, and maybe the input embedding's values.)
            kernel_weight = torch.empty(0, dtype=torch.bfloat16)
            if not library:
                self.dense = None
        elif self.int8 is not None and not self.head:
            # on the file's blocks (a build without panels: AVX2): every kernel row on linear_int8, so no bf16 copy;
            # prompt chunks keep the library's weight
            kernel_weight = torch.empty(0, dtype=torch.bfloat16)
        elif weight.dtype == torch.float32:
            narrow = cpu_gemm.exact_bf16(weight)
            kernel_weight = weight if narrow is None else narrow
        elif weight.dtype == torch.bfloat16:
            kernel_weight = weight
        else:
            kernel_weight = weight.float()
        self.register_buffer("kernel_weight", kernel_weight, persistent=False)
        self.blocks = None if self.int8 is not None else \
            _checked_blocks(getattr(linear, "gguf_weight", None), kernel_weight, gemm)
        self.group: SharedInputGroup | None = None  # siblings read with it in one call
        self.argmax: cpu_gemm.ArgmaxHead | None = None  # the output head's argmax route (exact_kernel_linears)

    @property
    def on_panels(self) -> bool:
        """Whether this layer's int8 blocks are laid out as panels (:meth:`CpuGemm.panels`): every pass on the
        many-row kernel."""
        return self.int8 is not None and self.int8.fmt >= cpu_gemm.PANELS

    def joins_weights(self) -> bool:
        """Whether a :class:`SharedInputGroup` may join this layer's bf16 weights: its rows run on AMX tiles and
        the library's weight for prompt chunks (if any) is the very same tensor."""
        weight = self.kernel_weight
        return (self.gemm.amx and self.int8 is None and weight.dtype == torch.bfloat16 and weight.shape[1] % 32 == 0
                and (self.head or self.dense.weight.data_ptr() == weight.data_ptr()))

    def share_weight(self, view: torch.Tensor) -> None:
        """Take ``view`` (the same values, in a :class:`SharedInputGroup`'s joined buffer) as this layer's weight,
        the library's too: the old tensor is freed."""
        if not torch.equal(view, self.kernel_weight):
            raise ValueError("a shared weight must hold this layer's values")
        self.kernel_weight = view
        if self.dense is not None:
            self.dense.weight = torch.nn.Parameter(view, requires_grad=False)

    @property
    def weight(self) -> torch.Tensor:
        """The layer's weight as the library reads it (the head's: its kernel copy); empty for a layer on panels
        that keeps no library weight (``in_features``, ``out_features`` give its shape)."""
        return self.dense.weight if self.dense is not None else self.kernel_weight

    @property
    def _blocks(self) -> dict[str, GgufWeight]:
        return {} if self.blocks is None else {"blocks": self.blocks}

    def kernel(self, x: torch.Tensor, shared: bool = True) -> torch.Tensor:
        """The kernel's rows; ``shared``: ``x`` is the very input the layer's siblings get (not a slice made for
        this layer), so a :class:`SharedInputGroup` may compute them all in one call."""
        if shared and self.group is not None and self.group.takes(x):
            return self.group.output(self, x)
        if self.int8 is not None:
            return self.gemm.linear_int8(x, self.int8, self.kernel_bias).to(x.dtype)
        if x.dtype == torch.bfloat16 == self.kernel_weight.dtype:  # natively where the CPU has AVX512-BF16
            return self.gemm.linear(x, self.kernel_weight, self.kernel_bias, **self._blocks)
        return self.gemm.linear(x.float(), self.kernel_weight, self.kernel_bias).to(x.dtype)

    def head_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The output head inside a pass: float32 logits with the values of ``kernel(x)``, in the kept buffer.
        Where every row's caller reads only the argmax (``ExactRows.argmax_only``) and an :class:`ArgmaxHead` takes
        the pass, rows whose argmax (ties included) is that of these logits."""
        if x.dtype == torch.float32 or x.dtype == self.kernel_weight.dtype == torch.bfloat16:
            size = x.numel() // x.shape[-1] * self.out_features
            out = self._head_out(size, torch.float32) if self.rows.reuse_logits and size * 4 <= HEAD_BUFFER_BYTES \
                else None
            if self.int8 is not None:
                return self.gemm.linear_int8(x, self.int8, self.kernel_bias, out=out)
            if self.argmax is not None and self.rows.argmax_only:
                bounded = self.argmax.logits(x, self.kernel_weight, out=out)
                if bounded is not None:
                    return bounded
            return self.gemm.logits(x, self.kernel_weight, self.kernel_bias, out=out, **self._blocks)
        return self.kernel(x)

    def _chunk(self, x: torch.Tensor) -> torch.Tensor:
        """A prompt chunk's rows: on the int8 route, int8 products laid out for many rows
        (:meth:`CpuGemm.gemm_int8`, each row alone); else the library GEMM, on a fresh buffer (its result may depend
        on the alignment)."""
        if self.int8 is not None and x.dtype == torch.float32:
            out = self.gemm.gemm_int8(x, self.int8, self.kernel_bias)
            if out is not None:
                return out
            if self.dense is None:  # an inf or NaN in some row, on panels without the library's weight
                return self.kernel(x, shared=False)
        return self.dense(x.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        rows = self.rows
        if rows.library and not self.head:
            if self.dense is None:
                raise RuntimeError("this model's layers on int8 panels keep no library weights: a peer's calls on "
                                   "the same model object need a runner built with library_weights=True")
            return self.dense(x)
        if self.head and rows.total and not rows.library:
            return self.head_logits(x)
        if self.head or not rows.chunks or rows.total != flat.shape[0]:
            return self.kernel(x)
        if self.on_panels and x.dtype == torch.float32:
            # on panels the kernel's rows and a prompt chunk's run on the same many-row kernel (each row alone,
            # the same bits either way): the whole pass in one call, no second read of the weights for the rows
            # that need logits and no copy of the chunks' outputs into place
            whole = self.gemm.gemm_int8(x, self.int8, self.kernel_bias)
            if whole is not None:
                return whole
        out = flat.new_empty(flat.shape[0], self.out_features)
        for first, count in rows.chunks:
            out[first : first + count] = self._chunk(flat[first : first + count])
        if rows.others is not None:
            out[rows.others] = self.kernel(flat[rows.others], shared=False)
        return out.reshape(*x.shape[:-1], self.out_features)


class SharedInputGroup:
    """Sibling layers that read the same input (a decoder layer's q/k/v projections, its gate/up projections),
    computed in one kernel call by the first of them to run; the others take their columns of that result.
    Each output is still its own dot product in the same order, so the bits are those of separate calls; what
    goes is the per-call cost (Python, the call, the threads' start), about a tenth of a one-token pass of the
    0.5B. Three kinds:

    - ``weights`` (on AMX tiles): the siblings' bf16 weights laid end to end, for passes of any size. The layers'
      weights (the kernel's and the library's for prompt chunks) become views of the joined buffer.
    - blocks (elsewhere): their GGUF blocks laid end to end, for passes of up to
      :data:`~foretell.engine.cpu_gemm.BLOCK_ROWS_MAX` rows; the layers' blocks become views of the joined buffer.
    - ``int8`` (exact mode's int8 products, :meth:`~foretell.engine.cpu_gemm.CpuGemm.linear_int8`): their GGUF
      blocks of one format laid end to end, for passes of any size; each input row is quantized once for all.

    None keeps extra memory."""

    def __init__(self, members: list[ExactKernelLinear], gemm: CpuGemm, weights: bool = False, int8: bool = False):
        self.weight: torch.Tensor | None = None
        self.blocks: GgufWeight | None = None
        self.int8 = int8
        if weights:
            self.weight = torch.cat([m.kernel_weight for m in members])
            offset = 0
            for m in members:
                m.share_weight(self.weight[offset : offset + m.out_features])
                offset += m.out_features
        else:  # the members' blocks (the int8 route's, or those decoded to bf16) laid end to end
            attr = "int8" if int8 else "blocks"
            parts: list[GgufWeight] = [getattr(m, attr) for m in members]
            data = torch.cat([part.data for part in parts])
            offset = 0
            for m, part in zip(members, parts):
                setattr(m, attr, GgufWeight(part.fmt, data[offset : offset + part.data.numel()], part.shape))
                offset += part.data.numel()
            self.blocks = GgufWeight(parts[0].fmt, data, (sum(m.out_features for m in members), parts[0].shape[1]))
        for m in members:
            m.group = self
        biases = [m.kernel_bias for m in members]
        self.bias = None if biases[0] is None else torch.cat(biases).contiguous()
        self.members, self.gemm = members, gemm
        self._input: torch.Tensor | None = None  # held while parts wait: no other tensor can take its id
        self._outputs: dict[int, torch.Tensor] = {}

    def takes(self, x: torch.Tensor) -> bool:
        rows = x.numel() // x.shape[-1]
        if self.int8:
            return rows > 0
        if self.weight is not None:
            return x.dtype == torch.bfloat16 and rows > 0
        return x.dtype == torch.bfloat16 and 0 < rows <= cpu_gemm.BLOCK_ROWS_MAX

    def output(self, member: ExactKernelLinear, x: torch.Tensor) -> torch.Tensor:
        """``member``'s result on ``x``: from the group's last call when that was on this very tensor and
        ``member`` has not taken its part yet, else from a new call for all. (The siblings' callers pass them the
        same tensor and change it in between in no model this serves; inference tensors keep no version count
        to check that.)"""
        if x is not self._input or id(member) not in self._outputs:
            if self.int8:
                joined = self.gemm.linear_int8(x, self.blocks, self.bias).to(x.dtype)
            elif self.weight is not None:
                joined = self.gemm.linear(x, self.weight, self.bias)
            else:
                joined = self.gemm.linear_blocks(x, self.blocks, self.bias)
            parts = joined.split([m.out_features for m in self.members], dim=-1)
            self._outputs = {id(m): part for m, part in zip(self.members, parts)}
            self._input = x
        part = self._outputs.pop(id(member))
        if not self._outputs:
            self._input = None  # every sibling served: hold nothing until the next pass
        return part

    @classmethod
    def join(cls, model, gemm: CpuGemm) -> int:
        """Group each module's ``q_proj``/``k_proj``/``v_proj`` and ``gate_proj``/``up_proj`` children (the
        Llama/Qwen layout) whose rows run on AMX tiles from bf16 weights, or elsewhere read GGUF blocks of one
        format; for q/k/v, all or none with a bias. Returns how many groups were made."""
        made = 0
        for module in model.modules():
            for names in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")):
                layers = [getattr(module, name, None) for name in names]
                layers = [m for m in layers if isinstance(m, ExactKernelLinear) and m.group is None]
                by_key: dict[tuple, list[ExactKernelLinear]] = {}
                for m in layers:
                    if m.int8 is not None:
                        key = ("int8", m.int8.fmt, m.int8.shape[1], m.kernel_bias is None)
                    elif gemm.amx:
                        key = ("weights", m.kernel_weight.shape[1], m.kernel_bias is None) if m.joins_weights() else None
                    else:
                        key = None if m.blocks is None else (m.blocks.fmt, m.blocks.shape[1], m.kernel_bias is None)
                    if key is not None:
                        by_key.setdefault(key, []).append(m)
                for key, group in by_key.items():
                    if len(group) > 1:
                        cls(group, gemm, weights=key[0] == "weights", int8=key[0] == "int8")
                        made += 1
        return made


def _checked_blocks(blocks: GgufWeight | None, weight: torch.Tensor, gemm: CpuGemm) -> GgufWeight | None:
    """``blocks`` where the kernel decodes them to exactly ``weight`` (bf16), else None: a layer reads its GGUF
    blocks (:attr:`ExactKernelLinear.blocks`) only where that gives the same bits as its bf16 weights, and not
    on AMX tiles, where its bf16 weights are the faster read (see :data:`~foretell.engine.cpu_gemm.BLOCK_ROWS_MAX`)."""
    if not gemm.decodes(blocks) or gemm.amx or weight.dtype != torch.bfloat16 \
            or tuple(weight.shape) != blocks.shape:
        return None
    if not torch.equal(gemm.dequantize(blocks).view(torch.int16), weight.contiguous().view(torch.int16)):
        log.warning("a layer's GGUF blocks do not decode to its bf16 weights; it reads the bf16 weights")
        return None
    return blocks


INT8_CHECKED_ROWS = 33  # rows of a layer whose GGUF blocks are checked against its weights (_int8_blocks)


def _int8_blocks(blocks: GgufWeight | None, weight: torch.Tensor, gemm: CpuGemm) -> GgufWeight | None:
    """``blocks`` where :meth:`CpuGemm.linear_int8` takes them and they hold this layer's weights (their values,
    rounded to bf16, are the layer's bf16 weights: a model converted from these blocks), else None. Checked on
    :data:`INT8_CHECKED_ROWS` rows spread over the weight, the first and the last included: the int8 route computes
    from the blocks alone, so the check is that they are this model's (another model's, or another layer's, differ
    in every row), and decoding every row of the 1.5B took seconds of each start-up."""
    if not gemm.int8_takes(blocks) or tuple(weight.shape) != blocks.shape:
        return None
    rows = torch.linspace(0, blocks.shape[0] - 1, min(blocks.shape[0], INT8_CHECKED_ROWS)).round().long().unique()
    decoded = torch.cat([gemm.decode_blocks(blocks, int(row), 1) for row in rows])
    if not torch.equal(decoded.bfloat16().view(torch.int16), weight[rows].bfloat16().view(torch.int16)):
        log.warning("a layer's GGUF blocks do not hold its weights; it keeps its bf16 route")
        return None
    return blocks


def stored_bf16(model_dir: Path) -> bool:
    """Whether a model directory's weights are stored in bf16 (its config says so: foretell's conversions do)."""
    import json

    try:
        config = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return (config.get("dtype") or config.get("torch_dtype")) == "bfloat16"


def widen_for_int8(model) -> None:
    """A model loaded in bf16 to compute in fp32 on exact mode's int8 route: every floating parameter and buffer
    widened to fp32 (exactly) but the weights of linear layers that keep GGUF blocks, which the route computes from
    the blocks alone (:func:`exact_kernel_linears` widens those it does not take, or keeps for the library). Loaded
    in fp32, the 1.5B's start-up peaked at 10.8 GB of memory for 1.9 GB kept."""
    with torch.no_grad():
        for module in model.modules():
            blocked = isinstance(module, torch.nn.Linear) and getattr(module, "gguf_weight", None) is not None
            for name, param in module.named_parameters(recurse=False):
                if param.is_floating_point() and param.dtype != torch.float32 and not (blocked and name == "weight"):
                    param.data = param.data.float()
            for name, buffer in module.named_buffers(recurse=False):
                if buffer is not None and buffer.is_floating_point() and buffer.dtype != torch.float32:
                    module._buffers[name] = buffer.float()


def int8_by_default(gemm: CpuGemm | None) -> bool:
    """Whether exact mode's kernel rows of an fp32 model take int8 products on GGUF blocks where a layer has them,
    when not asked: on a CPU without AMX whose build multiplies int8 (AVX512-VNNI, measured on a Cascade Lake Xeon
    and an AMD EPYC Zen 4, or AVX2 alone with VPMADDUBSW: an AMD EPYC Zen 3, plain decoding of the 0.5B 0.43x the
    time). With AMX the kernel multiplies bf16 on tiles and the route is asked for: on a Sapphire Rapids (2026-12-01)
    it decoded 2.3x as fast, but a 64-row verify pass cost 5.4 one-row passes against bf16's 1.9, so edits with a
    prediction took about the same time (0.66-1.80x per task) and their ratio to n-gram lookup fell (1.09x against
    1.13x; benchmarks/results/run-2026-12-01-spr-int8).
    On a CPU with AVX512-BF16 and no AMX, ``--dtype auto`` picks fp32 for a model with blocks to take this route
    (:func:`int8_dtype`)."""
    return gemm is not None and gemm.int8 and not gemm.amx


def int8_dtype(device: torch.device, dtype: torch.dtype, model_dir: Path, int8: bool | None = None,
               exact: bool | None = None) -> torch.dtype:
    """The dtype to load a model in for ``--dtype auto`` (``dtype``: what :func:`~foretell.models.loader.pick_dtype`
    chose) where exact mode's int8 route can take its linear layers: fp32 instead of bf16 on a CPU where
    :func:`int8_by_default` holds (``int8`` None) or where it is asked for (True), for a model that keeps its GGUF
    blocks (:data:`~foretell.models.gguf_blocks.BLOCKS_FILE`); the route computes in fp32 between its int8 products.
    On an AMD EPYC Zen 4 (AVX512-BF16 and VNNI, no AMX) the 0.5B decoded at 55-57 tokens/s this way against 30-31
    in bf16 (benchmarks/results/run-2026-11-30-zen4-int8). Anything else: ``dtype`` unchanged."""
    if dtype != torch.bfloat16 or device.type != "cpu" or int8 is False or exact is False:
        return dtype
    if not (Path(model_dir) / BLOCKS_FILE).is_file():
        return dtype
    gemm = cpu_gemm.load()
    wanted = int8_by_default(gemm) if int8 is None else gemm is not None and gemm.int8
    return torch.float32 if wanted else dtype


def exact_kernel_linears(model, argmax_head: bool = True, int8: bool | None = None,
                         panels: bool = True, library_weights: bool = False) -> ExactRows | None:
    """Exact mode on foretell's CPU kernel: swap every ``nn.Linear`` (the output head too) for an
    :class:`ExactKernelLinear` sharing one :class:`ExactRows` (returned, for the runner to fill per pass).
    None, with the model untouched, where the kernel does not run here (not on a CPU, no compiler, not x86).
    ``argmax_head``: where the build and the head take it, the head keeps an int8 copy for passes whose rows need
    only their argmax (:class:`foretell.engine.cpu_gemm.ArgmaxHead`: a bias-free head with a bf16 kernel weight,
    on AMX int8 tiles or AVX2; not for a head on the int8 route). ``int8``: the layers that keep GGUF blocks the
    build multiplies with int8 inputs compute their kernel rows that way (:meth:`CpuGemm.linear_int8`), the head
    too (a tied embedding's blocks: its argmax comes from those logits); None = :func:`int8_by_default`.
    ``panels``: those layers' blocks laid out as panels (:meth:`CpuGemm.panels`), so that decode steps, verify
    passes and prompt chunks all run on ``foretell_gemm_q8``'s tiles; ``library_weights``: those layers keep their
    fp32 weights for a peer's calls on the same model object (:meth:`ModelRunner.library_linears`), else no pass
    reads them and they go. An fp32 input embedding whose values are exactly bf16 keeps them in bf16
    (:class:`_NarrowEmbedding`: the same values looked up), shared with the head's kernel copy where equal."""
    param = next(model.parameters())
    gemm = cpu_gemm.load() if param.device.type == "cpu" else None
    if gemm is None:
        return None
    rows = ExactRows()
    head = model.get_output_embeddings()
    int8 = (int8_by_default(gemm) if int8 is None else int8 and gemm.int8) and param.dtype == torch.float32
    _swap_linears(model, lambda child: ExactKernelLinear(child, gemm, rows, keep_dense=child is not head,
                                                         int8=int8, panels=panels, library=library_weights))
    with torch.no_grad():  # a model loaded in bf16 for the int8 route (widen_for_int8): the library's weights in fp32
        for module in model.modules():
            if isinstance(module, ExactKernelLinear) and module.dense is not None \
                    and module.dense.weight.dtype != param.dtype:
                module.dense.to(param.dtype)
    _narrow_embedding(model)
    head = model.get_output_embeddings()
    if isinstance(head, ExactKernelLinear) and head.on_panels \
            and model.get_input_embeddings().weight is not head.kernel_weight:
        head.kernel_weight = head.kernel_weight.new_empty(0)  # no pass reads it (the 1.5B's: 467 MB)
    if gemm.reads_blocks or gemm.amx or int8:
        SharedInputGroup.join(model, gemm)
    head = model.get_output_embeddings()
    # without AMX, a bf16 head's short passes read its GGUF blocks where it has them (Q8_0: as few bytes)
    reads_blocks = (getattr(head, "blocks", None) is not None and gemm.reads_blocks and gemm.bf16dot
                    and param.dtype == torch.bfloat16)
    if (argmax_head and isinstance(head, ExactKernelLinear) and head.kernel_bias is None and head.int8 is None
            and cpu_gemm.ArgmaxHead.supports(gemm, head.kernel_weight) and (gemm.amx or not reads_blocks)):
        head.argmax = cpu_gemm.ArgmaxHead(gemm, head.kernel_weight)
    return rows


def _narrow_embedding(model) -> None:
    """Exact mode: an fp32 input embedding whose values are all exactly bf16 (a converted model's) keeps them in
    bf16, the very tensor of the output head's kernel copy where it holds the same values (a GGUF whose head is its
    token embedding): lookups widen the same values, at a half or none of the memory."""
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    if type(embedding) is not torch.nn.Embedding or embedding.weight.dtype != torch.float32:
        return
    narrow = cpu_gemm.exact_bf16(embedding.weight.detach())
    if narrow is None:
        return
    kept = getattr(head, "kernel_weight", None) if isinstance(head, ExactKernelLinear) else None
    if kept is not None and kept.dtype == torch.bfloat16 and kept.shape == narrow.shape and torch.equal(kept, narrow):
        narrow = kept
    model.set_input_embeddings(_NarrowEmbedding(narrow, embedding.padding_idx))


class _Fp32Linear(torch.nn.Module):
    """A bf16/fp16 linear layer computed by oneDNN's pre-packed fp32 GEMM (exact mode on a CPU whose
    low-precision GEMM is not row-invariant): the weights are widened exactly, each output rounded once back
    to the input's dtype. The layer's memory is that of fp32."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        from torch.utils.mkldnn import MkldnnLinear

        wide = torch.nn.Linear(linear.in_features, linear.out_features, bias=linear.bias is not None)
        with torch.no_grad():
            wide.weight.copy_(linear.weight.float())
            if linear.bias is not None:
                wide.bias.copy_(linear.bias.float())
        self.inner = MkldnnLinear(wide, torch.float32)

    @property
    def weight(self) -> torch.Tensor:
        return self.inner.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x.float()).to(x.dtype)


def widen_cpu_linears(model) -> int:
    """Swap every low-precision ``nn.Linear`` on the CPU for an :class:`_Fp32Linear`; returns how many."""
    return _swap_linears(model, lambda child: _Fp32Linear(child) if child.weight.device.type == "cpu"
                         and child.weight.dtype != torch.float32 else None)


def _linears(model) -> list[torch.nn.Module]:
    """The model's linear layers as they are called (a :class:`FixedRows` rather than the layer inside it)."""
    from torch.utils.mkldnn import MkldnnLinear

    kinds = (torch.nn.Linear, MkldnnLinear, _Fp32Linear)
    wrapped = {id(m.inner) for m in model.modules() if isinstance(m, FixedRows)}
    return [m for m in model.modules() if id(m) not in wrapped
            and (isinstance(m, kinds) or isinstance(m, FixedRows) and isinstance(m.inner, kinds))]


def _pad_one_row(module, args):
    """Forward pre-hook: a one-row input runs as two identical rows (a GEMM, not a GEMV)."""
    (x,) = args
    module._foretell_one_row = x.numel() == x.shape[-1]
    if module._foretell_one_row:
        return (torch.cat([x, x], dim=-2),)
    return None


def _unpad_one_row(module, args, output):
    if module._foretell_one_row:
        return output[..., :1, :]
    return None


class FixedRows(torch.nn.Module):
    """Exact mode on a GPU: runs the wrapped module (a linear layer or an RMSNorm) on blocks of exactly
    ``rows`` rows, the last one padded with zeros. Every call then has one shape, so the library runs one
    kernel with one reduction order, and a row's bits cannot depend on how many rows the pass has. (cuBLAS
    picks its GEMM kernel by shape, and a norm's reduction layout may follow the number of rows. On an H200
    the real 0.5B's answer changed in exact mode while one-row calls were only padded to two rows; with
    these blocks it did not.)

    Example: ``FixedRows(linear, 64)(x)`` with 100 rows runs ``linear`` twice, on 64 rows each."""

    def __init__(self, inner: torch.nn.Module, rows: int):
        super().__init__()
        self.inner, self.rows = inner, rows

    @property
    def weight(self) -> torch.Tensor:
        return self.inner.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return getattr(self.inner, "bias", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        n = flat.shape[0]
        if n % self.rows:
            flat = torch.cat([flat, flat.new_zeros(self.rows - n % self.rows, flat.shape[-1])])
        out = torch.cat([self.inner(block) for block in flat.split(self.rows)])
        return out[:n].reshape(*x.shape[:-1], out.shape[-1])


GPU_EXACT_ROWS = 64  # exact mode's block on a GPU (FixedRows): a decode step's one row is padded to this many
CPU_EXACT_ROWS = 16  # the CPU's last resort when padding one-row calls is not enough (see make_row_invariant)


def fix_rows(model, rows: int = GPU_EXACT_ROWS) -> int:
    """Wrap every linear layer (plain, oneDNN's or widened) and every RMSNorm of ``model`` in :class:`FixedRows`;
    returns how many."""
    from torch.utils.mkldnn import MkldnnLinear

    return _swap_linears(model, lambda child: FixedRows(child, rows), also=lambda child: isinstance(
        child, (MkldnnLinear, _Fp32Linear)) or type(child).__name__.endswith("RMSNorm"))


def make_row_invariant(model) -> int:
    """Make every linear layer's result for a row independent of the other rows of the call; returns how many
    layers were hooked or wrapped. On a GPU every linear layer and norm runs on fixed blocks of rows
    (:class:`FixedRows`). On a CPU no call runs on a single row (hooks pad it to two), and where this
    machine's GEMM for the model's dtype still lets rows depend on each other (bf16 on a CPU without native
    bf16), the layers compute in fp32 with oneDNN (:func:`widen_cpu_linears`). Where that is not enough either
    (oneDNN's bf16 and fp32 GEMMs on a Sapphire Rapids Xeon with AMX pick kernels by the number of rows), every
    linear layer and norm runs on blocks of :data:`CPU_EXACT_ROWS` rows, as on a GPU. Raises
    :class:`ExactModeUnavailable` where none holds (:func:`check_row_invariance`)."""
    if next(model.parameters()).device.type == "cuda":
        wrapped = fix_rows(model, GPU_EXACT_ROWS)
        check_row_invariance(model, rows=2 * GPU_EXACT_ROWS + 9)
        return wrapped
    prepack_cpu_linears(model)  # fp32 on CPU: oneDNN's GEMM keeps rows independent, MKL's does not
    handles = _hook_linears(model)
    try:
        check_row_invariance(model)
        return len(handles) // 2
    except ExactModeUnavailable:
        _remove(handles)
    if widen_cpu_linears(model):
        handles = _hook_linears(model)
        try:
            check_row_invariance(model)
            return len(handles) // 2
        except ExactModeUnavailable:
            _remove(handles)
    wrapped = fix_rows(model, CPU_EXACT_ROWS)
    check_row_invariance(model, rows=2 * CPU_EXACT_ROWS + 9)
    return wrapped


def _remove(handles: list) -> None:
    for handle in handles:
        handle.remove()


def _hook_linears(model) -> list:
    handles = []
    for m in _linears(model):
        m._foretell_one_row = False
        handles.append(m.register_forward_pre_hook(_pad_one_row))
        handles.append(m.register_forward_hook(_unpad_one_row))
    return handles


@torch.inference_mode()
def check_row_invariance(model, rows: int = 37, seed: int = 0, layers: Sequence[torch.nn.Module] | None = None
                         ) -> None:
    """Raise :class:`ExactModeUnavailable` unless every linear layer (one of each weight shape; ``layers``,
    default every linear module) gives each row the same bits in a pass of ``rows`` rows, alone, and in
    slices of the pass."""
    param = next(model.parameters())
    gen = torch.Generator().manual_seed(seed)
    seen: set[tuple] = set()
    for m in _linears(model) if layers is None else layers:
        out_features, in_features = (m.out_features, m.in_features) if isinstance(m, ExactKernelLinear) \
            else m.weight.shape
        shape = (in_features, out_features, getattr(m, "bias", getattr(m, "kernel_bias", None)) is not None)
        if shape in seen:
            continue
        seen.add(shape)
        x = torch.randn(1, rows, in_features, generator=gen).to(param.dtype).to(param.device)
        full = m(x)
        for a, b in ((0, 1), (rows - 1, rows), (0, 2), (3, 10), (5, rows)):
            if not torch.equal(m(x[:, a:b]), full[:, a:b]):
                raise ExactModeUnavailable(
                    f"exact mode: a linear layer {in_features}->{out_features} ({param.dtype}, "
                    f"{param.device}) gives rows {a}..{b - 1} other bits alone than in a pass of {rows} rows on "
                    "this machine's kernels; run without --exact"
                )


LEAN_MODEL_TYPES = frozenset({"qwen2", "llama"})  # decoder layers LeanDecoder runs as transformers does
GLUE_NORMS = frozenset({"Qwen2RMSNorm", "LlamaRMSNorm"})  # weight * (x / rms(x)), rounded as :class:`GlueRMSNorm` does


class GlueRMSNorm(torch.nn.Module):
    """Exact mode's RMSNorm on bf16 or fp32 rows, on foretell's kernel (:meth:`CpuGemm.rmsnorm`): in a pass of 128 rows
    torch's module ran 10 elementwise ops (conversions, square, mean, rsqrt, two products), about 10 ms of the 0.5B's
    200 ms pass on a 2-core Sapphire Rapids VM. Every row alone, so rows keep their bits in any pass; the values may
    differ from torch's module in the last bit of a few (its own sum of squares). :meth:`add` also takes the
    residual addition before it (the bits of torch's addition). Other inputs, and a peer's ``model.generate``
    on the same model (``ExactRows.library``), run the replaced class's forward. Same parameter names."""

    def __init__(self, norm: torch.nn.Module, gemm: CpuGemm, rows: ExactRows):
        super().__init__()
        self.weight, self.variance_epsilon = norm.weight, norm.variance_epsilon
        self.gemm, self.rows, self._module_forward = gemm, rows, type(norm).forward

    def _takes(self, h: torch.Tensor) -> bool:
        return h.dtype == self.weight.dtype and self.gemm.glues(h.dtype) and self.rows.glue and not self.rows.library \
            and h.device.type == "cpu"

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if not self._takes(h):
            return self._module_forward(self, h)
        return self.gemm.rmsnorm(h, self.weight, float(self.variance_epsilon))[1]

    def add(self, h: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h + delta, self(h + delta))`` in one pass over the rows."""
        if not (self._takes(h) and delta.dtype == h.dtype and delta.shape == h.shape):
            h = h + delta
            return h, self(h)
        return self.gemm.rmsnorm(h, self.weight, float(self.variance_epsilon), residual=delta)


class GlueMLP(torch.nn.Module):
    """Exact mode's gated MLP with SiLU (``down(silu(gate(x)) * up(x))``) whose activation runs on foretell's kernel
    (:meth:`CpuGemm.silu_mul`, reading the halves of a joined gate/up result in place): torch's bf16 SiLU and product
    took 12.6 ms of the 0.5B's 128-row pass on a 2-core Sapphire Rapids VM. Rounded where torch rounds; the
    exponential is the kernel's own, so a few values may differ from torch's in the last bit. Rows stay
    independent. A peer's ``model.generate`` (``ExactRows.library``) runs the replaced class's forward. Same
    submodules."""

    def __init__(self, mlp: torch.nn.Module, gemm: CpuGemm, rows: ExactRows):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj, self.act_fn = mlp.gate_proj, mlp.up_proj, mlp.down_proj, mlp.act_fn
        self.gemm, self.rows, self._module_forward = gemm, rows, type(mlp).forward

    def activation(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        if gate.dtype == up.dtype and self.gemm.glues(gate.dtype) and self.rows.glue and not self.rows.library \
                and gate.device.type == "cpu":
            return self.gemm.silu_mul(gate, up)
        return self.act_fn(gate) * up

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.rows.library:
            return self._module_forward(self, x)
        return self.down_proj(self.activation(self.gate_proj(x), self.up_proj(x)))


def _is_silu(act) -> bool:
    """torch's SiLU module or transformers' (``ACT2FN["silu"]``, whose forward is ``F.silu``)."""
    return isinstance(act, torch.nn.SiLU) or type(act).__name__ == "SiLUActivation"


def glue_layers(model, gemm: CpuGemm, rows: ExactRows) -> int:
    """Put :class:`GlueRMSNorm` and :class:`GlueMLP` in place of a bf16 or fp32 Qwen2/Llama model's RMSNorms and SiLU
    MLPs where the kernel has them for that dtype (:meth:`CpuGemm.glues`: fp32 in every build, bf16 with AVX-512);
    returns how many modules were replaced."""
    dtype = next(model.parameters()).dtype
    if dtype not in (torch.bfloat16, torch.float32) or not gemm.glues(dtype) \
            or getattr(model.config, "model_type", None) not in LEAN_MODEL_TYPES:
        return 0
    made = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__ in GLUE_NORMS and getattr(child, "weight", None) is not None \
                    and child.weight.dtype == dtype and hasattr(child, "variance_epsilon"):
                setattr(parent, name, GlueRMSNorm(child, gemm, rows))
                made += 1
            elif (all(hasattr(child, n) for n in ("gate_proj", "up_proj", "down_proj"))
                  and _is_silu(getattr(child, "act_fn", None)) and type(child).__name__.endswith("MLP")):
                setattr(parent, name, GlueMLP(child, gemm, rows))
                made += 1
    return made


class LeanDecoder:
    """Passes on the CPU in which every row needs logits (decode steps, verify passes of chains and of token trees,
    whose mask :func:`_packed_attention` builds), run as a plain loop over
    a Llama/Qwen2-style model's decoder layers: the same modules and functions in the same order as
    transformers' forward (its norms, its rotary embedding, :func:`_packed_attention`, each linear layer, in
    exact mode its kernel rows), without the wrappers in between (keyword plumbing and deprecation checks, the
    per-layer attention lookup, the causal-mask set-up, exact mode's row routing, the head's row selection):
    2.3-2.6 ms off every such pass of the 0.5B on a 2-core AMD EPYC, 7% of a one-token step (33 -> 30.7 ms).
    A pass with a prompt chunk, a model of another kind, or a GPU goes through transformers' forward. Token trees
    went that way too until 2026-11-26: on a 2-core Sapphire Rapids (0.5B, bf16) such a pass took 132 ms against
    73 ms for a chain of about the same size, and a garbage prediction's spare branches (none accepted) put 26 of
    them into one 256-token request; through the loop they cost what chains do (64-74 ms).
    :class:`ModelRunner` uses it only after a probe at start-up gave the same logits, to the bit, as
    transformers' forward. Where every layer is on exact mode's int8 route, the loop itself runs in one kernel call
    (``native``, :class:`~foretell.engine.layer_loop.Q8LayerLoop`: the same calls in C; the probe covers it, and
    without it the loop runs in Python)."""

    def __init__(self, model):
        base = model.model
        self.embed, self.rotary, self.norm = base.embed_tokens, base.rotary_emb, base.norm
        self.layers = list(base.layers)
        head = model.get_output_embeddings()
        self.head = head.head_logits if isinstance(head, ExactKernelLinear) else head
        self.rotate = sys.modules[type(self.layers[0].self_attn).__module__].apply_rotary_pos_emb
        norm = self.layers[0].input_layernorm  # exact mode's glue: the rotary embedding on the kernel too
        self.glue_gemm, self.glue_rows = (norm.gemm, norm.rows) if isinstance(norm, GlueRMSNorm) else (None, None)
        self.steps = [self._layer_step(layer) for layer in self.layers]
        # exact mode's int8 route: the whole loop in one kernel call where every layer is on it
        self.native: Q8LayerLoop | None = Q8LayerLoop.build(self)

    @staticmethod
    def _layer_step(layer) -> tuple:
        """What one decoder layer's loop body calls, looked up once (an AttributeError: not this layout)."""
        attn, mlp = layer.self_attn, layer.mlp
        rows = lambda m: m.kernel if isinstance(m, ExactKernelLinear) else m  # noqa: E731 (exact mode: kernel rows)
        act = mlp.activation if isinstance(mlp, GlueMLP) else (lambda gate, up, act_fn=mlp.act_fn: act_fn(gate) * up)
        return (layer.input_layernorm, rows(attn.q_proj), rows(attn.k_proj), rows(attn.v_proj), attn,
                attn.head_dim, attn.scaling, getattr(attn, "sliding_window", None), rows(attn.o_proj),
                layer.post_attention_layernorm, rows(mlp.gate_proj), rows(mlp.up_proj), act,
                rows(mlp.down_proj))

    @classmethod
    def build(cls, model) -> "LeanDecoder | None":
        """The loop for ``model`` where it is of a kind the loop follows (:data:`LEAN_MODEL_TYPES`), else None."""
        if getattr(model.config, "model_type", None) not in LEAN_MODEL_TYPES:
            return None
        try:
            return cls(model)
        except (AttributeError, TypeError, IndexError):
            return None

    def __call__(self, batch: "_PackedBatch", ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """float32 logits [rows, vocab] of a pass whose every row needs them (``ids``/``positions`` [1, rows])."""
        h = self.embed(ids)
        cos, sin = self.rotary(h, positions)
        if self.native is not None and self.native.takes(batch, self.glue_rows):
            x = self.native(batch, h, cos, sin)
            if x is not None:
                return self.head(x)[0].float()
        rows = ids.shape[1]
        delta = None  # what the last block adds to h, added by the next norm (with exact mode's glue, in its pass)
        for (norm1, q_proj, k_proj, v_proj, attn, head_dim, scaling, window, o_proj, norm2, gate_proj, up_proj,
             act, down_proj) in self.steps:
            h, x = _add_norm(norm1, h, delta)
            shape = (1, rows, -1, head_dim)
            q = q_proj(x).view(shape).transpose(1, 2)
            k = k_proj(x).view(shape).transpose(1, 2)
            v = v_proj(x).view(shape).transpose(1, 2)
            q, k = self._rope(q, k, cos, sin)
            out, _ = _packed_attention(attn, q, k, v, None, scaling=scaling, foretell_batch=batch,
                                       sliding_window=window)
            h, x = _add_norm(norm2, h, o_proj(out.reshape(1, rows, -1).contiguous()))
            delta = down_proj(act(gate_proj(x), up_proj(x)))
        return self.head(_add_norm(self.norm, h, delta)[1])[0].float()

    def _rope(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """transformers' ``apply_rotary_pos_emb``, on the kernel with exact mode's glue (:meth:`CpuGemm.rope`: the
        same bits, one call each for the queries and the keys instead of 14 ops)."""
        if self.glue_gemm is not None and self.glue_rows.glue and q.dtype == k.dtype == cos.dtype == sin.dtype \
                and self.glue_gemm.glues(q.dtype):
            return self.glue_gemm.rope(q, cos, sin), self.glue_gemm.rope(k, cos, sin)
        return self.rotate(q, k, cos, sin)


def _add_norm(norm, h: torch.Tensor, delta: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(h + delta, norm(h + delta))`` (``h`` as it is where ``delta`` is None); one kernel pass with exact mode's
    :class:`GlueRMSNorm`."""
    if delta is None:
        return h, norm(h)
    if isinstance(norm, GlueRMSNorm):
        return norm.add(h, delta)
    h = h + delta
    return h, norm(h)


def kv_shape_of(model) -> KVShape:
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    param = next(model.parameters())
    return KVShape(cfg.num_hidden_layers, kv_heads, head_dim, param.dtype, param.device)


def exact_by_default(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether exact mode is on when nobody asked either way (``EngineConfig(exact=None)``): where it costs
    little. On a CPU where foretell's kernels build (the rows that need logits run on its linear and attention
    kernels) it cost 0-7% of wall time on the real edits (AMD EPYC, bf16; docs/EXACT.md), so it is on there.
    For bf16 on a CPU with AMX only where the kernels run on AMX tiles too (``CpuGemm.amx``): oneDNN's GEMM makes
    long verify passes nearly free there, and the kernel's VDPBF16PS rows were not (a 2-core Sapphire Rapids
    Xeon, the 0.5B's 64-token pass: 538 ms in exact mode against 254 ms; ``foretell bench`` ran real edits 4.29x
    plain decoding against 6.91x, benchmarks/results/run-2026-11-26-spr), while its AMX rows and attention keep
    up with oneDNN and SDPA (docs/EXACT.md). Off on a GPU (every layer on 64-row blocks: a 129-token pass cost
    6.7x the default's on an H200) and where the kernel cannot be built (the padded route)."""
    gemm = cpu_gemm.load() if device.type == "cpu" else None
    if gemm is None:
        return False
    from foretell.models.loader import cpu_has_amx

    return gemm.amx or not (dtype == torch.bfloat16 and cpu_has_amx())


def cpu_attention_kernel(shape: KVShape) -> CpuGemm | None:
    """foretell's CPU attention (``cpu_gemm.c``) where it runs for caches of this shape, else None (SDPA)."""
    if shape.device.type != "cpu":
        return None
    gemm = cpu_gemm.load()
    return gemm if gemm is not None and gemm.attends(shape.dtype, shape.head_dim) else None


def sdpa_is_faster(shape: KVShape) -> bool:
    """Whether SDPA beats foretell's CPU attention for caches of this shape: bf16 on a CPU with AMX, where
    PyTorch's FlashAttention runs on AMX tiles, unless the kernel runs on AMX tiles too (head sizes that are a
    multiple of 64: ``CpuGemm.attends_on_amx``). On the lent GPU machine's host CPU (an Intel Xeon with AMX,
    torch 2.11, 2 threads; ``benchmarks/results/gpu-2026-11-26-h100``), ms per layer call, SDPA against the
    VDPBF16PS kernel: a 512-token prompt chunk after 1,536 keys 10.8 against 23.2 (the 0.5B's heads) and 8.9
    against 35.9 (the 1.5B's); 128 verify queries after 4,000 keys 6.6 against 14.7 and 5.6 against 23.8; one
    query even (0.27/0.25) or SDPA ahead (0.31/0.48). The AMX kernel was ahead of SDPA at every size measured
    on a 2-core Sapphire Rapids VM (docs/EXACT.md). Elsewhere (AMD EPYC Zen 4 with AVX512-BF16, a Xeon without
    AMX, fp32) the kernel was faster at every size measured."""
    from foretell.models.loader import cpu_has_amx

    if shape.device.type != "cpu" or shape.dtype != torch.bfloat16 or not cpu_has_amx():
        return False
    gemm = cpu_gemm.load()
    return gemm is None or not gemm.attends_on_amx(shape.head_dim)


class ModelRunner:
    """Runs packed forward passes of a transformers causal LM over per-sequence KV buffers.

    The interface the engine relies on (the target and a draft model are both runners, built by the
    engine's caller): ``forward(segments)`` over a packed batch, ``kv_shape`` for the per-sequence KV it
    writes by position (rollback = lowering ``SeqKV.length``), ``vocab_size``, ``device`` and ``model``.
    """

    def __init__(self, model, exact: bool = False, cpu_attention: bool = True, argmax_head: bool = True,
                 layer_glue: bool = True, int8: bool | None = None, int8_panels: bool = True,
                 library_weights: bool = False):
        missing = unsupported_attention(model)
        if missing is not None:
            name = type(model).__name__
            raise UnsupportedModelError(
                f"{name} uses {missing}, which foretell's packed attention does not implement; its outputs "
                "would be wrong, so this model is refused"
            )
        self.model = model.eval()
        self.model.config._attn_implementation = ATTN_NAME
        for sub in self.model.modules():  # some models keep a per-module copy of the config
            cfg = getattr(sub, "config", None)
            if cfg is not None and hasattr(cfg, "_attn_implementation"):
                cfg._attn_implementation = ATTN_NAME
        self.kv_shape = kv_shape_of(model)
        self.device = self.kv_shape.device
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.exact = exact
        # foretell's CPU attention: for the queries that need logits where exact mode needs it or it is faster,
        # and for a prompt chunk's queries where it is faster (not bf16 on AMX: sdpa_is_faster)
        kernel = cpu_attention_kernel(self.kv_shape) if cpu_attention else None
        faster = kernel is not None and not sdpa_is_faster(self.kv_shape)
        self.attention_kernel = kernel if faster or exact else None
        self.chunk_attention_kernel = kernel if faster else None
        if self.chunk_attention_kernel is not None and self.kv_shape.dtype == torch.float32:  # every chain's keys
            self.kv_shape = replace(self.kv_shape, key_tile=kernel.key_tile)    # go through it: tiled
        self._exact_rows: ExactRows | None = None  # exact mode on foretell's kernel: this pass's row split
        head = model.get_output_embeddings()  # outside exact mode, a CPU head with two kernels keeps its logits
        self._kept_head = head if isinstance(head, RowDispatchLinear) and not exact else None
        if exact:
            self._exact_rows = exact_kernel_linears(self.model, argmax_head, int8, int8_panels, library_weights)
            if self._exact_rows is None:
                make_row_invariant(self.model)
            else:
                check_row_invariance(self.model, layers=[m for m in self.model.modules()
                                                         if isinstance(m, ExactKernelLinear)])
                if layer_glue:
                    glue_layers(self.model, next(m.gemm for m in self.model.modules()
                                                 if isinstance(m, ExactKernelLinear)), self._exact_rows)
        detach_blocks(self.model)  # blocks the layers did not take (not exact mode's kernel route)
        self._lean: LeanDecoder | None = None
        lean = LeanDecoder.build(self.model) if self.device.type == "cpu" else None
        if lean is not None:
            self._lean = self._checked_lean(lean)

    @contextlib.contextmanager
    def library_linears(self):
        """Calls of the model outside foretell's passes (a peer's ``model.generate`` on the same model object in a
        benchmark) run exact mode's linear layers on the library GEMM, as the model would without foretell,
        instead of every row on foretell's kernel. Nothing changes outside exact mode's kernel route."""
        if self._exact_rows is None:
            yield
            return
        self._exact_rows.library = True
        try:
            yield
        finally:
            self._exact_rows.library = False

    @property
    def exact_kernel(self) -> bool:
        """Whether exact mode runs on foretell's row-invariant kernel (else on padded oneDNN GEMMs)."""
        return self._exact_rows is not None

    @property
    def kernel_on_amx(self) -> bool:
        """Whether exact mode's kernel computes every linear layer's rows on AMX tiles (bf16 weights on a CPU
        with AMX): there it is faster than the library GEMM for prompt chunks of every size too."""
        layers = [m for m in self.model.modules() if isinstance(m, ExactKernelLinear)]
        return self.attention_kernel is not None and bool(layers) and all(m.joins_weights() for m in layers)

    @property
    def block_layers(self) -> int:
        """How many linear layers read their GGUF blocks in short passes (:mod:`foretell.models.gguf_blocks`)."""
        return sum(m.blocks is not None for m in self.model.modules()
                   if isinstance(m, (ExactKernelLinear, RowDispatchLinear)))

    @property
    def int8_layers(self) -> int:
        """How many linear layers compute their kernel rows with int8 products on GGUF blocks
        (:meth:`CpuGemm.linear_int8`)."""
        return sum(getattr(m, "int8", None) is not None for m in self.model.modules()
                   if isinstance(m, ExactKernelLinear))

    @property
    def panel_layers(self) -> int:
        """How many of those read their blocks laid out as panels (:meth:`CpuGemm.panels`)."""
        return sum(m.on_panels for m in self.model.modules() if isinstance(m, ExactKernelLinear))

    @property
    def block_groups(self) -> int:
        """How many :class:`SharedInputGroup` s compute their layers in one call (from blocks or joined weights)."""
        return len({id(m.group) for m in self.model.modules() if getattr(m, "group", None) is not None})

    @property
    def lean(self) -> bool:
        """Whether passes whose every row needs logits run :class:`LeanDecoder`'s loop."""
        return self._lean is not None

    @torch.inference_mode()
    def forward(self, segments: list[Segment], reuse_logits: bool = False) -> list[torch.Tensor]:
        """Run all segments in one pass; returns per segment float32 logits ``[num_logits, vocab]`` and
        advances nothing: the caller sets ``kv.length`` to what verification accepted. ``reuse_logits``: the
        caller is done with these logits before its next pass, so they may live in a buffer that pass reuses
        (the output head's, on a CPU), which spares a long pass the page faults of a fresh one."""
        for seg in segments:
            seg.kv.ensure(seg.kv.length + len(seg.tokens))
        batch = _PackedBatch(segments, self.exact, self.attention_kernel, self.chunk_attention_kernel is not None)
        ids = torch.tensor([t for s in segments for t in s.tokens], device=self.device)[None]
        positions = torch.tensor([p for s in segments for p in s.positions()], device=self.device)[None]
        if self._lean is not None and all(s.num_logits == len(s.tokens) for s in segments):
            # a decode or verify pass, chains or token trees: every row needs logits
            if self._exact_rows is not None:
                self._exact_rows.fill(segments, reuse_logits)
            if self._kept_head is not None:
                self._kept_head.keep_logits = reuse_logits
            try:
                logits = self._lean(batch, ids, positions)
                batch.keys_tiled()
                return self._split(logits, segments)
            finally:
                if self._exact_rows is not None:
                    self._exact_rows.clear()
                if self._kept_head is not None:
                    self._kept_head.keep_logits = False
        keep = [off + len(s.tokens) - s.num_logits + j for s, off in zip(segments, batch.offsets) for j in range(s.num_logits)]
        if not keep:
            keep = [batch.total - 1]
        if self._exact_rows is not None:
            self._exact_rows.fill(segments, reuse_logits)
        if self._kept_head is not None:
            self._kept_head.keep_logits = reuse_logits
        try:
            with attention_backends(self.device):
                out = self.model(
                    input_ids=ids,
                    position_ids=positions,
                    use_cache=False,
                    logits_to_keep=torch.tensor(keep, device=self.device),
                    foretell_batch=batch,
                )
            batch.keys_tiled()
        finally:
            if self._exact_rows is not None:
                self._exact_rows.clear()
            if self._kept_head is not None:
                self._kept_head.keep_logits = False
        return self._split(out.logits[0].float(), segments)

    @staticmethod
    def _split(logits: torch.Tensor, segments: list[Segment]) -> list[torch.Tensor]:
        result, row = [], 0
        for s in segments:
            result.append(logits[row : row + s.num_logits])
            row += s.num_logits
        return result

    def _checked_lean(self, lean: LeanDecoder) -> LeanDecoder | None:
        """``lean`` where it gives transformers' forward's logits (:meth:`_lean_matches`), with its one-call loop
        (:class:`Q8LayerLoop`) where that does too, else None."""
        try:
            matches = self._lean_matches(lean)
        except Exception as exc:  # a layout the loop does not follow after all: transformers' forward
            log.warning("the lean decoder loop failed on this model (%s)", exc)
            matches = False
        if matches:
            return lean
        if lean.native is not None:
            log.warning("the one-call layer loop's logits differ from transformers' forward for this model; "
                        "passes run layer by layer")
            lean.native = None
            return self._checked_lean(lean)
        log.warning("the lean decoder loop's logits differ from transformers' forward for this model; every pass "
                    "goes through transformers' forward")
        return None

    def _lean_matches(self, lean: LeanDecoder) -> bool:
        """Whether ``lean`` gives transformers' forward's logits to the bit: a 7-token prompt chunk, then passes
        of 1 and 5 tokens (every row with logits) and a token tree (a pending token and two branches that part
        after one node; where trees are verified at all), each run both ways on the same cache."""
        generator = torch.Generator().manual_seed(0)
        vocab = min(self.vocab_size, self.model.get_input_embeddings().weight.shape[0])
        tokens = torch.randint(0, vocab, (18,), generator=generator).tolist()
        kv = SeqKV(self.kv_shape, capacity=24, max_capacity=24)
        self.forward([Segment(kv, tokens[:7], num_logits=0)])
        kv.length = 7
        tree = [-1, 0, 0, 2]  # the nodes' parents (-1: the pending token): branches n0-n1 and n0-n2-n3
        # exact mode verifies chains only, and sliding-window attention takes no trees
        trees = not self.exact and not any(getattr(layer.self_attn, "sliding_window", None) for layer in lean.layers)
        passes = ((7, 8, None), (8, 13, None)) + (((13, 18, tree),) if trees else ())
        for start, end, parents in passes:
            segment = Segment(kv, tokens[start:end], num_logits=end - start, parents=parents)
            expected = self.forward([segment])[0].clone()  # self._lean is None yet: transformers' forward
            self._lean = lean
            try:
                got = self.forward([segment])[0]
            finally:
                self._lean = None
            if not torch.equal(got, expected):
                return False
            kv.length = end
        return True
