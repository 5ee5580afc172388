"""A tiny qwen2 written as a GGUF file (for the conversion and GGUF-block tests), its tensors in F32 or in GGUF's
block formats: Q8_0 and Q5_0 quantized by gguf-py, Q4_K and Q6_K as random blocks (gguf-py only decodes those)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import torch

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# the byte offsets of each block's fp16 scales in the K-quant formats written as random blocks (others: 0)
_K_QUANT_SCALES = {"Q4_K": (0, 2), "Q6_K": (208,)}


def random_blocks(qtype_name: str, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """``rows`` x ``cols`` values as random blocks of a GGUF format (uint8 [rows, bytes per row]): random bytes,
    with each block's fp16 scales drawn small and positive, so the values are finite and near those of a model."""
    import gguf

    qtype = getattr(gguf.GGMLQuantizationType, qtype_name)
    per, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(rows * cols // per, nbytes), dtype=np.uint8)
    for offset in _K_QUANT_SCALES.get(qtype_name, (0,)):
        scales = (rng.uniform(0.5, 2.0, size=len(blocks)) * 2.0 ** -10).astype(np.float16)
        blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, -1)


def write_tiny_qwen2_gguf(
    path: Path,
    hidden_size: int = 32,
    intermediate_size: int = 64,
    block_format: Callable[[str], str | None] | None = None,
):
    """A 2-layer qwen2 with a byte-level vocabulary written to ``path`` as a GGUF. ``block_format(gguf name)``
    names a GGUF block format for a 2-D tensor (``"Q8_0"``, ``"Q5_0"``: gguf-py quantizes the model's values;
    ``"Q4_K"``, ``"Q6_K"``: random blocks) or None for F32. Returns the reference model (F32 tensors: exactly
    the file's values) and the (end-of-text, end-of-turn) ids."""
    import gguf
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    byte_tokens = list(bytes_to_unicode().values())
    merges = ["Ġ t", "h e", "Ġt he"]
    tokens = byte_tokens + ["Ġt", "he", "Ġthe", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * (len(tokens) - 3) + [3, 3, 3]
    eot, im_end = tokens.index("<|endoftext|>"), tokens.index("<|im_end|>")

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokens), hidden_size=hidden_size, intermediate_size=intermediate_size, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=2.0**-20,
        tie_word_embeddings=True, bos_token_id=eot, eos_token_id=im_end, pad_token_id=eot,
    )
    ref = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for p in ref.parameters():  # random everything (biases, norms too), exactly representable in bf16
            p.copy_((torch.randn_like(p) * 0.2).to(torch.bfloat16).float())

    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_name("tiny qwen2")
    w.add_block_count(2)
    w.add_context_length(256)
    w.add_embedding_length(hidden_size)
    w.add_feed_forward_length(intermediate_size)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(float(ref.config.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(2.0**-20)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(eot)
    w.add_eos_token_id(im_end)
    w.add_pad_token_id(eot)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, 2)
    state = ref.state_dict()
    for hf_name, tensor in state.items():
        if hf_name == "lm_head.weight":
            continue  # tied: llama.cpp writes no output.weight
        base, suffix = hf_name.rsplit(".", 1)
        name = f"{names.get_name(base)}.{suffix}"
        fmt = block_format(name) if block_format is not None and tensor.dim() == 2 else None
        if fmt is None:
            w.add_tensor(name, tensor.float().numpy())
            continue
        qtype = getattr(gguf.GGMLQuantizationType, fmt)
        if fmt in _K_QUANT_SCALES:
            blocks = random_blocks(fmt, *tensor.shape, seed=len(name))
        else:
            blocks = gguf.quants.quantize(tensor.float().numpy(), qtype)
        w.add_tensor(name, blocks, raw_dtype=qtype)
        values = torch.from_numpy(gguf.quants.dequantize(blocks, qtype).reshape(tensor.shape).copy())
        with torch.no_grad():
            state[hf_name].copy_(values)  # the reference holds the file's values
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ref, (eot, im_end)
