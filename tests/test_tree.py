"""Token trees: two candidate drafts verified in one pass stay exact (tiny random models, fp32)."""

from __future__ import annotations

import pytest
import torch

from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.core.draft import Draft, Proposer
from foretell.core.policy import Decision, DraftPolicy, Option
from foretell.engine import llm_engine
from foretell.engine.api import GenerationRequest
from foretell.engine.kv_cache import SeqKV
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import ModelRunner, Segment
from foretell.testing import make_tiny_model, make_tiny_tokenizer

FLAT = CostModel({2: 1.0, 64: 1.1, 256: 1.2})


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def model(request):
    return make_tiny_model(arch=request.param, seed=3)


@pytest.fixture(scope="module")
def tokenizer():
    return make_tiny_tokenizer()


def _logits(runner: ModelRunner, prefix: list[int], tokens: list[int], parents=None) -> torch.Tensor:
    kv = SeqKV(runner.kv_shape, capacity=256, max_capacity=256)
    runner.forward([Segment(kv, prefix, num_logits=0)])
    kv.length = len(prefix)
    return runner.forward([Segment(kv, tokens, num_logits=len(tokens), parents=parents)])[0]


def test_tree_pass_gives_each_branch_its_chain_logits(model):
    """Nodes of a tree (a main draft and a branch departing after 2 shared tokens) get the logits they get
    as plain chains: positions by depth, attention to ancestors only."""
    runner = ModelRunner(model)
    prefix, last = [5, 17, 42, 8, 99], 23
    main, branch = [7, 8, 9, 10, 11], [7, 8, 30, 31]
    tree_tokens = [last] + main + branch[2:]
    parents = [-1, 0, 1, 2, 3, 1, 5]  # nodes 0-4 = main chain; 5, 6 = the branch after node 1
    tree = _logits(runner, prefix, tree_tokens, parents)
    chain_main = _logits(runner, prefix, [last] + main)
    chain_branch = _logits(runner, prefix, [last] + branch)
    torch.testing.assert_close(tree[:6], chain_main, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(tree[[0, 1, 2, 6, 7]], chain_branch, rtol=1e-4, atol=1e-4)
    # without the tree mask the branch's nodes would see the main draft's: their logits differ
    assert not torch.allclose(_logits(runner, prefix, tree_tokens)[6], chain_branch[3], atol=1e-3)


class _Script(Proposer):
    """Proposes the known output from the current position, spoiled after ``keep`` tokens when ``wrong``."""

    def __init__(self, output: list[int], vocab: int, wrong: bool, source: str):
        self.output, self.vocab, self.wrong, self.source, self.pos = output, vocab, wrong, source, 0

    def propose(self, k: int) -> Draft:
        tokens = list(self.output[self.pos : self.pos + k])
        if self.wrong and tokens:
            keep = self.pos % 3  # 0, 1 or 2 tokens shared with the right branch
            tokens = tokens[:keep] + [(t + 1) % self.vocab for t in tokens[keep:]]
        return Draft(tokens, None, self.source)

    def observe(self, tokens) -> None:
        self.pos += len(tokens)


class _Both(Proposer):
    def __init__(self, wrong: _Script, right: _Script):
        self.wrong, self.right = wrong, right

    def propose(self, k: int) -> Draft:
        return self.wrong.propose(k)

    def observe(self, tokens) -> None:
        self.wrong.observe(tokens)
        self.right.observe(tokens)

    def parts(self) -> list[Proposer]:
        return [self.wrong, self.right]


def _forced_tree_policy():
    class ForcedTree(DraftPolicy):
        """Always a tree: a wrong main draft and the right continuation as the branch."""

        def decide(self, room, batch_tokens=0, batch_expected=0.0, context=0):
            wrong, right = self.proposer.parts()
            k = min(room // 2, 4)  # main + branch within room
            if k < 1:
                return Decision()
            options = [Option(wrong, "w", k, 1.0, 0.5, k), Option(right, "r", k, 1.0, 0.5, k)]
            main, branch = wrong.propose(k), right.propose(k)
            if not main.tokens or main.tokens == branch.tokens[: len(main)]:
                return Decision(branch, options[1], options)
            return Decision(main, options[0], options, branch=branch, branch_option=options[1])

    return ForcedTree


@pytest.mark.parametrize("sampling", [SamplingParams(temperature=0.0),
                                      SamplingParams(temperature=0.8, top_p=0.9, seed=7)], ids=["greedy", "seeded"])
def test_engine_follows_the_winning_branch_exactly(model, tokenizer, monkeypatch, sampling):
    """Every step verifies a wrong main draft beside the right branch: the branch wins, its KV is moved into
    place, and the output is plain decoding's, token for token, in several requests at once."""
    vocab = len(tokenizer)
    cfg = dict(max_num_seqs=4, kv_budget_tokens=8192, k_max=16, measure_cost_curve=False)
    prompts = [tokenizer.encode(t) for t in ("def add(a, b):", "class Snake:", "Hello, world! 3")]

    def requests(spec):
        return [GenerationRequest(prompt_ids=p, max_tokens=40, sampling=sampling, speculation=spec,
                                  request_id=str(i)) for i, p in enumerate(prompts)]

    plain_engine = LLMEngine(model, tokenizer, EngineConfig(**cfg, adaptive_k=True))
    plain = {rid: [t for o in outs for t in o.new_token_ids]
             for rid, outs in plain_engine.generate(requests(SpeculationParams(method="none"))).items()}
    by_prompt = {tuple(p): plain[str(i)] for i, p in enumerate(prompts)}

    def make_proposer(prompt_ids, spec, classes=None):
        out = by_prompt[tuple(prompt_ids)]
        return _Both(_Script(out, vocab, True, "prediction"), _Script(out, vocab, False, "ngram"))

    monkeypatch.setattr(llm_engine, "make_proposer", make_proposer)
    monkeypatch.setattr(llm_engine, "DraftPolicy", _forced_tree_policy())
    engine = LLMEngine(model, tokenizer, EngineConfig(**cfg))
    outs = engine.generate(requests(SpeculationParams()))
    got = {rid: [t for o in chunks for t in o.new_token_ids] for rid, chunks in outs.items()}
    assert got == plain
    for rid, chunks in outs.items():
        stats = chunks[-1].stats
        assert stats.sources["ngram"].accepted > len(plain[rid]) // 2  # the branch's tokens were kept
        assert stats.forward_passes < len(plain[rid]) / 2
    assert engine.pool.reserved_tokens == 0


def test_kv_move_works_on_buffers_grown_inside_the_forward_pass():
    """The runner grows KV buffers under inference mode; moving a tree's accepted path happens outside it."""
    from foretell.engine.kv_cache import KVShape

    kv = SeqKV(KVShape(2, 1, 4, torch.float32, torch.device("cpu")), capacity=8, max_capacity=256)
    with torch.inference_mode():
        kv.ensure(100)  # as ModelRunner.forward does
        for t in kv.keys + kv.values:
            t.copy_(torch.arange(t.numel(), dtype=t.dtype).reshape(t.shape))
    expected = kv.keys[0][:, [20, 21, 30]].clone()
    kv.move([20, 21, 30], 10)
    torch.testing.assert_close(kv.keys[0][:, 10:13], expected)
