"""A converted GGUF model's linear weights kept in their quantized blocks too, beside its bf16 weights.

A pass of a few rows is memory-bound: it reads every weight once. The bf16 weights of a model converted from a
quantized GGUF are 2 bytes each; the file's own blocks hold the same values in fewer (Q5_0: 0.69, Q8_0: 1.06,
Q4_K: 0.56). At conversion, :func:`save_blocks` stores each linear layer's raw blocks
(:data:`BLOCKS_FILE`: safetensors, uint8 tensors named as the model's weights, their GGUF types in the metadata);
:func:`attach_blocks` hands them to the layers at load time, and foretell's CPU kernel reads them for short passes
where it decodes them to exactly the layer's bf16 weights (checked per layer, :mod:`foretell.engine.runner`), so
the outputs keep every bit; in fp32 on CPUs without native bf16 (VNNI, or AVX2 alone) it multiplies them with int8
inputs, as llama.cpp does (:meth:`foretell.engine.cpu_gemm.CpuGemm.linear_int8`).

Only files whose tensors transformers loads unchanged are kept (no per-architecture reordering, such as llama's
permuted query and key rows), and only the block formats the kernel reads (:data:`GGUF_BLOCKS
<foretell.engine.cpu_gemm.GGUF_BLOCKS>`; Q6_K only by the int8 route: its bf16 weights were faster to read than
its blocks to decode to bf16).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BLOCKS_FILE = "gguf_blocks.foretell"
"""A safetensors file, under a name no model loader takes for weights (vLLM loads every ``*.safetensors`` of a
single-file model's directory)."""
_TYPES_KEY = "gguf_types"


def save_blocks(reader: Any, model: Any, out_dir: Path) -> int:
    """Store the raw GGUF blocks of ``model``'s linear weights (and of a tied embedding, which the output head
    reads) from ``reader`` (a ``gguf.GGUFReader`` of the file the model was converted from) in ``out_dir``.
    Returns how many tensors were kept (0 writes no file)."""
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
        read_field,
    )

    from foretell.engine.cpu_gemm import GGUF_BLOCKS

    architecture = read_field(reader, "general.architecture")[0]
    if TENSOR_PROCESSORS.get(architecture, TensorProcessor) is not TensorProcessor:
        return 0  # transformers reorders or rewrites some of this architecture's tensors
    names = get_gguf_hf_weights_map(model, TensorProcessor(config=model.config))
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    embedding = model.get_input_embeddings()
    wanted = {name: module for name, module in model.named_modules()
              if isinstance(module, torch.nn.Linear) and not (tied and module is model.get_output_embeddings())}
    wanted.update({name: module for name, module in model.named_modules() if module is embedding and tied})
    tensors, types = {}, {}
    for tensor in reader.tensors:
        name = names.get(tensor.name, "")
        module = wanted.get(name.removesuffix(".weight")) if name.endswith(".weight") else None
        fmt = int(tensor.tensor_type)
        if module is None or fmt not in GGUF_BLOCKS:
            continue
        k, n = (int(d) for d in tensor.shape)
        if tuple(module.weight.shape) != (n, k) or k % GGUF_BLOCKS[fmt][0]:
            continue
        tensors[name] = torch.from_numpy(np.ascontiguousarray(tensor.data).view(np.uint8).reshape(-1).copy())
        types[name] = fmt
    if tensors:
        save_file(tensors, str(Path(out_dir) / BLOCKS_FILE), metadata={_TYPES_KEY: json.dumps(types)})
    return len(tensors)


def attach_blocks(model: Any, model_dir: Path) -> int:
    """Give each linear layer of ``model`` whose blocks ``model_dir`` keeps a ``gguf_weight``
    (:class:`foretell.engine.cpu_gemm.GgufWeight`); a head tied to the embedding gets the embedding's. Returns how
    many layers got one. Nothing for models off the CPU or in fp16, where the kernel does not read blocks (bf16: the
    decoded blocks; fp32: int8 products, :meth:`foretell.engine.cpu_gemm.CpuGemm.linear_int8`)."""
    import torch
    from safetensors import safe_open

    from foretell.engine.cpu_gemm import GgufWeight

    path = Path(model_dir) / BLOCKS_FILE
    param = next(model.parameters())
    if not path.is_file() or param.device.type != "cpu" or param.dtype not in (torch.bfloat16, torch.float32):
        return 0
    head = model.get_output_embeddings()
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    embedding = model.get_input_embeddings()
    attached = 0
    with safe_open(str(path), framework="pt") as blocks:
        types = json.loads((blocks.metadata() or {}).get(_TYPES_KEY, "{}"))
        for name, fmt in types.items():
            try:
                module = model.get_submodule(name.removesuffix(".weight"))
                weight = GgufWeight(int(fmt), blocks.get_tensor(name), tuple(module.weight.shape))
            except (AttributeError, ValueError, TypeError):  # not this model's layer, a format not read here
                continue
            targets = [module] if isinstance(module, torch.nn.Linear) else []
            if module is embedding and tied and isinstance(head, torch.nn.Linear):
                targets.append(head)
            for target in targets:
                target.gguf_weight = weight
                attached += 1
    return attached


def detach_blocks(model: Any) -> None:
    """Drop the ``gguf_weight`` of every layer (the layers that read blocks keep their own reference)."""
    for module in model.modules():
        if hasattr(module, "gguf_weight"):
            del module.gguf_weight
