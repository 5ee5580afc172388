"""A real server on the tiny model for end-to-end tests (the playground in a browser, streaming clients).

``printable_tiny_engine`` is the tiny random model with its output restricted to printable ASCII tokens
(the rows of the other tokens in the output layer are zeroed, so their logits are exactly 0 and greedy
decoding never picks them while any printable token scores above 0). Its greedy answers are deterministic,
never end early (no end-of-sequence), and decode to text that tokenises back mostly to the same tokens —
so a prediction made from an earlier answer is largely accepted, which a test can see.
"""

from __future__ import annotations

import torch

from foretell.testing.server import serve_in_thread  # noqa: F401  (re-exported for the playground tests)
from foretell.testing.tiny import SPECIAL_TOKENS, make_tiny_model, make_tiny_tokenizer


def printable_token_ids(tokenizer) -> list[int]:
    """Ids whose text is non-empty printable ASCII (newlines allowed) and not a special token."""
    from foretell.server.detok import TokenTexts

    texts = TokenTexts(tokenizer)
    special = {tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    keep = []
    for i in range(len(tokenizer)):
        raw = texts.get(i)[1]
        if i not in special and raw and all(32 <= b < 127 or b == 10 for b in raw):
            keep.append(i)
    return keep


def printable_tiny_model(seed: int = 0):
    """The tiny Qwen2 model whose greedy output is printable ASCII and never stops before max_tokens."""
    tokenizer = make_tiny_tokenizer()
    model = make_tiny_model(seed=seed)
    keep = set(printable_token_ids(tokenizer))
    drop = [i for i in range(model.lm_head.weight.shape[0]) if i not in keep]
    with torch.no_grad():
        model.lm_head.weight[drop] = 0.0
    return model


def printable_tiny_engine(name: str = "tiny", **config):
    """An AsyncEngine serving ``printable_tiny_model`` (no cost-curve measurement: it starts at once)."""
    from foretell.config import EngineConfig
    from foretell.engine.async_engine import AsyncEngine

    config.setdefault("max_prediction_tokens", 4096)
    cfg = EngineConfig(measure_cost_curve=False, **config)
    return AsyncEngine.from_model(printable_tiny_model(), make_tiny_tokenizer(), cfg, name)
