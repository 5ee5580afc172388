"""The prompt's own logprobs (``GenerationRequest.prompt_logprobs``: what /v1/completions' ``echo`` with ``logprobs``
returns): against the model's own forward pass over the prompt (transformers, fp32, the tiny random model), over
several scoring chunks, with the prefix cache warm, beside other requests; and the tokens the request generates are
those of the same request without it."""

from __future__ import annotations

import torch

from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import SCORING_CHUNK, LLMEngine
from foretell.testing import make_tiny_model, make_tiny_tokenizer


def make_engine(model, tok, **cfg) -> LLMEngine:
    return LLMEngine(model, tok, EngineConfig(**{"max_num_seqs": 8, "kv_budget_tokens": 16384, "prefill_chunk": 64,
                                                 "k_max": 32, "measure_cost_curve": False, **cfg}))


def reference(model, prompt: list[int], top: int):
    with torch.no_grad():
        logits = model(torch.tensor([prompt])).logits[0].float().log_softmax(-1)
    chosen = [logits[i, prompt[i + 1]].item() for i in range(len(prompt) - 1)]
    tops = [logits[i].topk(top) for i in range(len(prompt) - 1)] if top else None
    return chosen, tops


def run(engine, req):
    outs = engine.generate([req])[req.request_id]
    return outs, [t for o in outs for t in o.new_token_ids]


def test_prompt_logprobs_are_the_models_over_several_chunks_and_with_the_cache_warm():
    model, tok = make_tiny_model(), make_tiny_tokenizer()
    engine = make_engine(model, tok)
    prompt = (tok.encode("def add(a, b):\n    return a + b\n\n") * 12)[: 2 * SCORING_CHUNK + 17]
    chosen, tops = reference(model, prompt, 3)
    plain = GenerationRequest(prompt_ids=prompt, max_tokens=12, sampling=SamplingParams(temperature=0.0))
    _, plain_tokens = run(engine, plain)  # this also leaves the prompt in the prefix cache
    for prediction in (None, tuple(plain_tokens)):
        req = GenerationRequest(prompt_ids=prompt, max_tokens=12, sampling=SamplingParams(temperature=0.0),
                                speculation=SpeculationParams(prediction=prediction), prompt_logprobs=3)
        outs, tokens = run(engine, req)
        got = outs[0].prompt_logprobs
        assert all(o.prompt_logprobs is None for o in outs[1:])
        assert [lp.token_id for lp in got] == prompt[1:]
        torch.testing.assert_close(torch.tensor([lp.logprob for lp in got]), torch.tensor(chosen), atol=1e-4, rtol=0)
        for lp, best in zip(got, tops):
            assert [t for t, _ in lp.top] == best.indices.tolist()
            torch.testing.assert_close(torch.tensor([v for _, v in lp.top]), best.values, atol=1e-4, rtol=0)
        assert tokens == plain_tokens  # the reply is the same
        assert outs[-1].stats.cached_tokens == 0  # every position computed again for its logits


def test_prompt_logprobs_beside_other_requests_in_one_batch():
    model, tok = make_tiny_model(), make_tiny_tokenizer()
    engine = make_engine(model, tok)
    prompts = [tok.encode("x = 1\n" * n) for n in (9, 30, 4)]
    reqs = [GenerationRequest(prompt_ids=p, max_tokens=6, sampling=SamplingParams(temperature=0.0),
                              prompt_logprobs=0 if i != 1 else None) for i, p in enumerate(prompts)]
    outs = engine.generate(reqs)
    for req, p in zip(reqs, prompts):
        first = outs[req.request_id][0]
        if req.prompt_logprobs is None:
            assert first.prompt_logprobs is None
            continue
        chosen, _ = reference(model, p, 0)
        assert [lp.top for lp in first.prompt_logprobs] == [[]] * (len(p) - 1)
        torch.testing.assert_close(torch.tensor([lp.logprob for lp in first.prompt_logprobs]), torch.tensor(chosen),
                                   atol=1e-4, rtol=0)
