"""A whole pass of a Qwen2/Llama decoder's layers in one call of foretell's CPU kernel (``foretell_layers_q8``), for
exact mode's int8 route (fp32 models on CPUs with AVX512-VNNI or AVX2 and neither AMX nor AVX512-BF16, where every
linear layer computes its rows with int8 products on the GGUF file's blocks).

:class:`~foretell.engine.runner.LeanDecoder` runs a pass whose every row needs logits (a decode step, a verify pass
of chains) as a Python loop over the layers: per layer about a dozen kernel calls (RMSNorm with the residual add,
the q/k/v projections, the rotary embedding, the attention, o_proj, RMSNorm, gate/up, SiLU * up, down_proj) and as
many tensors, views and checks. On a 2-core Cascade Lake that was about 16 ms of a 50 ms one-token pass of the 0.5B
(the kernels' own work outside the linear layers: 3.5 ms). :class:`Q8LayerLoop` describes every layer once (the
pointers of its weights' blocks, biases and norms) and runs the loop in C: the same functions on the same inputs in
the same order, so the same bits (checked at start-up with the rest of the lean loop, and by the tests).

Its description holds raw pointers into the layers' tensors: it is built once, after exact mode has set the layers
up, and serves as long as they keep those tensors.
"""

from __future__ import annotations

import ctypes

import torch

from foretell.engine.cpu_gemm import INT8_FORMATS, CpuGemm

_ptr, _int = ctypes.c_void_p, ctypes.c_int


class _Call(ctypes.Structure):
    """One ``foretell_linear_q8`` call: blocks, bias (or None), format, output columns."""

    _fields_ = [("w", _ptr), ("b", _ptr), ("fmt", _int), ("n", _int)]


class _Layer(ctypes.Structure):
    _fields_ = [("norm1", _ptr), ("norm2", _ptr), ("qkv", _Call * 3), ("gu", _Call * 2), ("o", _Call),
                ("down", _Call), ("n_qkv", _int), ("n_gu", _int), ("window", _int), ("qkv_src", _int * 3),
                ("qkv_col", _int * 3), ("gu_src", _int * 2), ("gu_col", _int * 2)]


class _Seq(ctypes.Structure):
    _fields_ = [("rows", _int), ("start", _int), ("capacity", ctypes.c_long), ("keys", _ptr), ("values", _ptr),
                ("tiles", _ptr), ("tile_cap", ctypes.c_long), ("valid", _int)]


def _call(blocks, bias: torch.Tensor | None, n: int) -> _Call:
    if blocks is None or blocks.fmt not in INT8_FORMATS or blocks.shape[0] != n:
        raise TypeError("not on the int8 route")
    if bias is not None and (bias.dtype != torch.float32 or not bias.is_contiguous() or bias.shape != (n,)):
        raise TypeError("a bias the kernel does not read")
    return _Call(blocks.data.data_ptr(), None if bias is None else bias.data_ptr(), blocks.fmt, n)


def _projections(members: list, width: int) -> tuple[list[_Call], list[tuple[int, int]]]:
    """The calls that compute ``members`` (exact mode's kernel layers reading one input of ``width`` values: a
    :class:`~foretell.engine.runner.SharedInputGroup` of int8 blocks is one call), and where each member's
    columns start: (call, column)."""
    calls: list[_Call] = []
    where: list[tuple[int, int]] = []
    seen: dict[int, int] = {}
    for m in members:
        group = m.group
        if group is None:
            where.append((len(calls), 0))
            calls.append(_call(m.int8, m.kernel_bias, m.out_features))
            continue
        if not group.int8 or any(other not in members for other in group.members):
            raise TypeError("a group the loop does not follow")
        if id(group) not in seen:
            seen[id(group)] = len(calls)
            calls.append(_call(group.blocks, group.bias, group.blocks.shape[0]))
        column = 0
        for other in group.members:
            if other is m:
                break
            column += other.out_features
        where.append((seen[id(group)], column))
    if any(m.int8.shape[1] != width for m in members):
        raise TypeError("inputs of another width")
    return calls, where


class Q8LayerLoop:
    """The layers of a :class:`~foretell.engine.runner.LeanDecoder` as one ``foretell_layers_q8`` call (see the
    module's docstring). :meth:`build` returns None where a layer is not on the int8 route or the layout differs."""

    def __init__(self, gemm: CpuGemm, layers: ctypes.Array, final_norm: torch.Tensor, eps: float, scale: float,
                 shape: tuple[int, int, int, int, int], keep: list):
        self.gemm, self.layers, self.final_norm, self.eps, self.scale = gemm, layers, final_norm, eps, scale
        self.hidden, self.heads, self.kv_heads, self.head_dim, self.intermediate = shape
        self._keep = keep  # the tensors whose pointers the description holds
        self.passes = 0  # passes run through the loop (tests and benchmarks read it)

    @classmethod
    def build(cls, lean) -> "Q8LayerLoop | None":
        from foretell.engine.runner import ExactKernelLinear, GlueMLP, GlueRMSNorm

        gemm = lean.glue_gemm
        fn = None if gemm is None else gemm.layers_q8
        if fn is None or not lean.layers or not isinstance(lean.norm, GlueRMSNorm):
            return None
        first = lean.layers[0].self_attn
        try:
            heads, kv_heads, head_dim = first.q_proj.out_features // first.head_dim, \
                first.k_proj.out_features // first.head_dim, first.head_dim
            hidden = lean.norm.weight.shape[0]
            intermediate = lean.layers[0].mlp.gate_proj.out_features
            eps, scale = float(lean.norm.variance_epsilon), first.scaling
            described = (_Layer * len(lean.layers))()
            keep: list = [lean.norm.weight]
            for layer, out in zip(lean.layers, described):
                attn, mlp = layer.self_attn, layer.mlp
                norms = (layer.input_layernorm, layer.post_attention_layernorm)
                linears = (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj,
                           mlp.down_proj)
                if not (all(isinstance(n, GlueRMSNorm) and n.weight.dtype == torch.float32
                            and n.weight.is_contiguous() and float(n.variance_epsilon) == eps for n in norms)
                        and all(isinstance(m, ExactKernelLinear) and m.int8 is not None for m in linears)
                        and isinstance(mlp, GlueMLP) and attn.scaling == scale and attn.head_dim == head_dim
                        and gemm.attends(torch.float32, head_dim)):
                    return None
                qkv, qkv_at = _projections([attn.q_proj, attn.k_proj, attn.v_proj], hidden)
                gu, gu_at = _projections([mlp.gate_proj, mlp.up_proj], hidden)
                if ([m.out_features for m in linears] != [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim,
                                                           hidden, intermediate, intermediate, hidden]
                        or attn.o_proj.int8.shape[1] != heads * head_dim
                        or mlp.down_proj.int8.shape[1] != intermediate):
                    return None
                out.norm1, out.norm2 = norms[0].weight.data_ptr(), norms[1].weight.data_ptr()
                for i, call in enumerate(qkv):
                    out.qkv[i] = call
                for i, call in enumerate(gu):
                    out.gu[i] = call
                out.n_qkv, out.n_gu = len(qkv), len(gu)
                out.o = _call(attn.o_proj.int8, attn.o_proj.kernel_bias, hidden)
                out.down = _call(mlp.down_proj.int8, mlp.down_proj.kernel_bias, hidden)
                out.window = int(getattr(attn, "sliding_window", None) or 0)
                for i, (src, col) in enumerate(qkv_at):
                    out.qkv_src[i], out.qkv_col[i] = src, col
                for i, (src, col) in enumerate(gu_at):
                    out.gu_src[i], out.gu_col[i] = src, col
                keep += [n.weight for n in norms] + [m.int8.data for m in linears] \
                    + [m.kernel_bias for m in linears if m.kernel_bias is not None] \
                    + [m.group.blocks.data for m in linears if m.group is not None] \
                    + [m.group.bias for m in linears if m.group is not None and m.group.bias is not None]
        except (AttributeError, TypeError, IndexError):
            return None
        return cls(gemm, described, lean.norm.weight, eps, scale,
                   (hidden, heads, kv_heads, head_dim, intermediate), keep)

    def takes(self, batch, rows) -> bool:
        """Whether this pass of ``batch`` (every row with logits) can run through the loop: chains on foretell's
        attention, fp32 caches, exact mode's glue on (``rows``: its :class:`~foretell.engine.runner.ExactRows`)."""
        return (batch.exact and batch.kernel is not None and rows is not None and rows.glue and not rows.library
                and all(seg.parents is None and seg.kv.keys and seg.kv.keys[0].dtype == torch.float32
                        for seg in batch.segments))

    def __call__(self, batch, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor | None:
        """The final norm's output [1, rows, hidden] for the embeddings ``h`` [1, rows, hidden] and the rotary
        ``cos``/``sin`` [1, rows, head_dim] of this pass; None where the kernel declined (an inf or NaN in some
        row: the caller runs the pass layer by layer, which handles those). Writes the pass's keys and values."""
        segments = batch.segments
        rows = h.shape[1]
        seqs = (_Seq * len(segments))()
        tables = []
        for seq, seg, start, tiled, valid in zip(seqs, segments, batch.starts, batch.tiled, batch.tiles_valid):
            kv = seg.kv
            keys = (_ptr * len(kv.keys))(*[t.data_ptr() for t in kv.keys])
            values = (_ptr * len(kv.values))(*[t.data_ptr() for t in kv.values])
            tables += [keys, values]
            seq.rows, seq.start, seq.capacity = len(seg.tokens), start, kv.keys[0].shape[1]
            seq.keys, seq.values = ctypes.addressof(keys), ctypes.addressof(values)
            if tiled:  # the sequence's tiled keys (SeqKV.tiles), valid up to where this pass writes
                tiles = (_ptr * len(kv.tiles))(*[t.data_ptr() for t in kv.tiles])
                tables.append(tiles)
                seq.tiles, seq.valid = ctypes.addressof(tiles), valid
                seq.tile_cap = kv.tiles[0].shape[1] * kv.tiles[0].shape[3]
        h, cos, sin = h.float().contiguous(), cos.float().contiguous(), sin.float().contiguous()
        out = torch.empty(1, rows, self.hidden, dtype=torch.float32)
        code = self.gemm.layers_q8(self.layers, len(self.layers), seqs, len(segments), h.data_ptr(), cos.data_ptr(),
                                   sin.data_ptr(), self.final_norm.data_ptr(), out.data_ptr(), rows, self.hidden,
                                   self.heads, self.kv_heads, self.head_dim, self.intermediate, self.eps, self.scale,
                                   torch.get_num_threads())
        if code != 0:
            return None
        self.passes += 1
        return out
