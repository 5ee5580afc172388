"""Tiny random-weight causal LMs (Llama, Qwen2) and a small byte-level BPE tokenizer with a chat template.

Nothing is downloaded: the tokenizer is trained in memory on a fixed text, the model is built from a
config with a fixed seed. ``init_scale`` makes the random logits peaked so greedy decoding is stable.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_TRAINING_TEXT = """
def add(a, b):
    return a + b

class Snake:
    def __init__(self, width, height):
        self.body = [(width // 2, height // 2)]
        self.direction = (1, 0)

    def move(self):
        head = self.body[0]
        self.body.insert(0, (head[0] + self.direction[0], head[1] + self.direction[1]))
        self.body.pop()
The quick brown fox jumps over the lazy dog. Hello, world! Ünïcödé — ✓ 你好 🐍
for i in range(10):
    print(i, i * i)
"""


@lru_cache(maxsize=None)
def make_tiny_tokenizer(vocab_size: int = 400):
    """A byte-level BPE tokenizer (any text encodes; multi-byte characters can split across tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([_TRAINING_TEXT] * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def make_tiny_model(
    arch: str = "qwen2",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    vocab_size: int | None = None,
    num_layers: int = 2,
    hidden_size: int = 64,
    init_scale: float = 0.2,
    max_position_embeddings: int = 2048,
    intermediate_size: int | None = None,
):
    """A random-weight causal LM of the given architecture ("qwen2" or "llama"), in eval mode."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    tokenizer = make_tiny_tokenizer()
    vocab = vocab_size or len(tokenizer)
    common = dict(
        vocab_size=vocab,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        initializer_range=init_scale,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    config_cls = {"qwen2": Qwen2Config, "llama": LlamaConfig}[arch]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config_cls(**common), dtype=dtype)
    return model.eval()


def save_tiny_model_dir(path: str | Path, arch: str = "qwen2", seed: int = 0) -> Path:
    """Write a tiny model + tokenizer as an HF directory (safetensors), usable as ``--model PATH``."""
    path = Path(path)
    make_tiny_model(arch=arch, seed=seed).save_pretrained(path)
    make_tiny_tokenizer().save_pretrained(path)
    return path
