"""Model runner: one forward pass over a packed batch of segments from many sequences.

Every running sequence contributes one *segment*: the tokens whose keys/values are not yet in its KV
(a prompt chunk, or its last token) followed by its draft. The segments are packed into a single row
(no padding), each with its own positions, and run through an unmodified transformers causal LM whose
attention is the registered function :func:`_packed_attention`: per segment it writes the new keys/values
into the sequence's own buffers at their positions and attends over that sequence's keys only. Logits are
computed only at the positions verification needs (``logits_to_keep``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from foretell.engine.kv_cache import KVShape, SeqKV

ATTN_NAME = "foretell_packed"


@dataclass
class Segment:
    """New tokens of one sequence, written to KV slots ``[kv.length, kv.length + len(tokens))``.
    ``num_logits`` of the last tokens need logits (draft length + 1; 0 for a mid-prompt chunk).

    A chain (``parents`` None) occupies the positions of its slots. A token *tree* gives, for each of the
    last ``len(parents)`` tokens (the draft nodes), its parent among them (-1 = the token before the
    nodes): a node sits at position (that token's position + its depth) and attends to the cache, the
    tokens before the nodes, its ancestors and itself (branches of one pass verified together)."""

    kv: SeqKV
    tokens: list[int]
    num_logits: int
    parents: list[int] | None = None

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

    def __init__(self, segments: list[Segment]):
        self.segments = segments
        self.starts = [s.kv.length for s in segments]
        offsets, off = [], 0
        for s in segments:
            offsets.append(off)
            off += len(s.tokens)
        self.offsets = offsets
        self.total = off
        self._masks: dict[tuple[int, int | None], tuple[int, torch.Tensor | None]] = {}

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
        first, mask = batch.mask(i, window, query.device)
        out = F.scaled_dot_product_attention(
            query[:, :, off : off + n],
            keys[None, :, first : start + n],
            values[None, :, first : start + n],
            attn_mask=mask,
            scale=scaling,
            enable_gqa=True,
        )
        outputs.append(out)
    out = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=2)
    return out.transpose(1, 2).contiguous(), None


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

    swapped = 0
    with torch.no_grad():
        for module in list(model.modules()):
            for name, child in list(module.named_children()):
                if type(child) is torch.nn.Linear:
                    setattr(module, name, MkldnnLinear(child, torch.float32))
                    swapped += 1
    return swapped


def kv_shape_of(model) -> KVShape:
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    param = next(model.parameters())
    return KVShape(cfg.num_hidden_layers, kv_heads, head_dim, param.dtype, param.device)


class ModelRunner:
    """Runs packed forward passes of a transformers causal LM over per-sequence KV buffers."""

    def __init__(self, model):
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

    @torch.inference_mode()
    def forward(self, segments: list[Segment]) -> list[torch.Tensor]:
        """Run all segments in one pass; returns per segment float32 logits ``[num_logits, vocab]`` and
        advances nothing: the caller sets ``kv.length`` to what verification accepted."""
        for seg in segments:
            seg.kv.ensure(seg.kv.length + len(seg.tokens))
        batch = _PackedBatch(segments)
        ids = torch.tensor([t for s in segments for t in s.tokens], device=self.device)[None]
        positions = torch.tensor([p for s in segments for p in s.positions()], device=self.device)[None]
        keep = [off + len(s.tokens) - s.num_logits + j for s, off in zip(segments, batch.offsets) for j in range(s.num_logits)]
        if not keep:
            keep = [batch.total - 1]
        out = self.model(
            input_ids=ids,
            position_ids=positions,
            use_cache=False,
            logits_to_keep=torch.tensor(keep, device=self.device),
            foretell_batch=batch,
        )
        logits = out.logits[0].float()
        result, row = [], 0
        for s in segments:
            result.append(logits[row : row + s.num_logits])
            row += s.num_logits
        return result
