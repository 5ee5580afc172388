"""The draft policy: per-source estimates, counterfactual evidence, token trees priced by the cost curve."""

from __future__ import annotations

import random

import pytest

from foretell.config import SpeculationParams
from foretell.core.adaptive_k import AttentionCost, CostModel
from foretell.core.draft import Draft, Proposer
from foretell.core.policy import DraftPolicy
from foretell.core.prediction import FenceOpening, LeadIn, make_proposer
from foretell.core.simulate import simulate_policy
from foretell.core.tokens import TokenClasses

FLAT = CostModel({8: 1.03, 64: 1.5, 128: 2.2})  # a machine where verifying many tokens is nearly free
STEEP = CostModel({2: 2.0, 64: 64.0})  # every token costs a full pass: speculation cannot pay


def _text(seed: int, n: int, vocab: int = 5000) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(100, vocab) for _ in range(n)]


def _generate(policy: DraftPolicy, proposer: Proposer, output: list[int], end: int) -> None:
    """Verify ``policy``'s drafts against ``output`` step by step (the target's rule) up to position ``end``."""
    pos = 0
    while pos < end:
        decision = policy.decide(128)
        hits = 0
        while hits < len(decision.draft.tokens) and decision.draft.tokens[hits] == output[pos + hits]:
            hits += 1
        emitted = output[pos:min(pos + hits + 1, end)]
        policy.record(decision, emitted)
        proposer.observe(emitted)
        pos += len(emitted)


def test_garbage_prediction_does_not_starve_ngram_lookup():
    """The file is in the prompt, the prediction is garbage: drafts come from n-gram lookup and the run
    takes about as many passes as n-gram lookup alone (without per-source choice it took the aligner's)."""
    output = _text(1, 300)
    prompt = _text(2, 50) + output + _text(3, 20)
    garbage = tuple(_text(4, 300))
    runs = {}
    for method in ("ngram", "auto", "prediction"):
        spec = SpeculationParams(prediction=garbage, method=method)
        runs[method] = simulate_policy(DraftPolicy(make_proposer(prompt, spec), FLAT), output, 64)
    assert runs["auto"].passes <= runs["ngram"].passes + 2
    assert runs["prediction"].passes > 3 * runs["ngram"].passes
    assert runs["auto"].sources["ngram"][1] > 250


def test_good_prediction_beats_ngram_when_prompt_lacks_the_text():
    output = _text(5, 300)
    prompt = _text(6, 80)
    edited = tuple(output[:150] + _text(7, 5) + output[150:])
    auto = simulate_policy(DraftPolicy(make_proposer(prompt, SpeculationParams(prediction=edited)), FLAT), output)
    ngram = simulate_policy(DraftPolicy(make_proposer(prompt, SpeculationParams(method="ngram")), FLAT), output)
    assert auto.passes * 4 < ngram.passes
    assert auto.sources["prediction"][1] > 280


class _Fixed(Proposer):
    def __init__(self, tokens: list[int], source: str):
        self.tokens, self.source = tokens, source

    def propose(self, k: int) -> Draft:
        return Draft(self.tokens[:k], None, self.source)

    def observe(self, tokens) -> None:
        pass


class _Two(Proposer):
    def __init__(self, a: Proposer, b: Proposer):
        self.a, self.b = a, b

    def propose(self, k: int) -> Draft:
        return self.a.propose(k)

    def observe(self, tokens) -> None:
        pass

    def parts(self) -> list[Proposer]:
        return [self.a, self.b]


def test_disagreeing_sources_become_a_tree_only_where_the_pass_affords_it():
    proposer = _Two(_Fixed(list(range(10, 40)), "prediction"), _Fixed(list(range(50, 80)), "ngram"))
    flat = DraftPolicy(proposer, FLAT).decide(room=64)
    assert flat.draft.tokens and flat.branch is not None
    assert flat.branch.tokens[0] != flat.draft.tokens[0]
    nodes, parents, branches = flat.tree()
    assert len(nodes) == len(flat.draft) + len(flat.branch) and parents[len(flat.draft)] == -1
    steep = DraftPolicy(proposer, STEEP).decide(room=64)
    assert steep.branch is None
    without = DraftPolicy(proposer, FLAT, trees=False).decide(room=64)
    assert without.branch is None


def test_counterfactual_evidence_moves_the_estimate_of_a_source_that_did_not_draft():
    right = list(range(100, 160))
    proposer = _Two(_Fixed([1] * 60, "prediction"), _Fixed(right, "ngram"))
    policy = DraftPolicy(proposer, FLAT, trees=False)
    decision = policy.decide(room=32)
    assert decision.source == "prediction"  # higher prior while nothing is known
    before = policy.tracker("ngram").alpha
    policy.record(decision, right[:1])  # the target emitted ngram's first token
    assert policy.tracker("ngram").alpha > before
    assert policy.tracker("prediction").alpha < 0.6  # its draft was rejected at the first token


def test_engine_trace_records_every_step_with_its_reasons(tmp_path):
    from foretell.config import EngineConfig, SamplingParams
    from foretell.engine.api import GenerationRequest
    from foretell.engine.llm_engine import LLMEngine
    from foretell.engine.trace import summarize
    from foretell.testing import make_tiny_model, make_tiny_tokenizer
    import json

    tok = make_tiny_tokenizer()
    path = tmp_path / "trace.jsonl"
    engine = LLMEngine(make_tiny_model(seed=2), tok, EngineConfig(measure_cost_curve=False, trace_path=str(path)))
    prompt = tok.encode("def add(a, b):")
    greedy = SamplingParams(temperature=0.0)
    plain = engine.generate([GenerationRequest(prompt, 30, greedy, SpeculationParams(method="none"), request_id="p")])
    out = [t for o in plain["p"] for t in o.new_token_ids]
    engine.generate([GenerationRequest(prompt, 30, greedy, SpeculationParams(prediction=tuple(out)), request_id="q")])
    records = [json.loads(line) for line in path.read_text().splitlines()]
    mine = [r for r in records if r["request"] == "q"]
    assert sum(r["emitted"] for r in mine) == len(out)
    assert mine[0]["source"] == "prediction" and mine[0]["options"][0]["context"] == "prediction/start"
    assert all("aligner" in r and r["cost"] >= 1.0 for r in mine)
    assert len(mine) == engine.forward_passes - len([r for r in records if r["request"] == "p"]) < 5
    summary = summarize(records)
    assert summary["p"]["contexts"] == {"none": {"steps": len(out), "drafted": 0, "accepted": 0}}
    assert summary["q"]["contexts"]["prediction/start"]["accepted"] > 0


@pytest.mark.parametrize("trees", [True, False])
def test_a_draft_continues_past_the_end_of_the_prediction(trees):
    """The reply is the file plus a closing fence: the prediction (the file) ends, and what followed the file in
    the prompt (its fence) goes on in the same draft, one chain. Without it the fence took one more pass: on
    the real-edit bench, and on vLLM (one chain per request, no token trees), where replaying the nine real
    edits of the 0.5B took 5.5% fewer passes with it (SQL 4 -> 3, Markdown 5 -> 4)."""
    file = _text(7, 120)
    fence = [11, 12, 13, 14]
    prompt = _text(8, 30) + file + fence + _text(9, 10)
    policy = DraftPolicy(make_proposer(prompt, SpeculationParams(prediction=tuple(file))), FLAT, trees=trees)
    policy.proposer.observe(file[:112])
    for _ in range(4):  # as seen on the bench: the aligned prediction exact so far, lookup once wrong
        policy.tracker("prediction/aligned").record(30, 30)
    policy.tracker("ngram/4").record(30, 2)
    decision = policy.decide(room=64)
    assert decision.source == "prediction" and decision.chosen.context == "prediction/aligned"
    assert decision.draft.tokens[:8] == file[112:]
    assert decision.draft.tokens[8:12] == fence  # the prompt's continuation after the file: its fence
    nodes, parents, branches = decision.tree()
    assert parents is None or parents[8] == 7  # one chain


def test_the_continuation_needs_a_long_match_in_the_prompt():
    """Past the prediction's end only a match of 8+ tokens continues: a rewritten or unknown ending drafts
    nothing more (a short match would guess from anywhere in the prompt)."""
    from foretell.core.ngram import NgramProposer

    file = _text(7, 40)
    lookup = NgramProposer(_text(8, 5) + file + [11, 12, 13])
    assert lookup.continuation(file[-10:], 2) == [11, 12]
    assert lookup.continuation([99] + file[-5:], 2) == []  # 5 tokens: too weak
    policy = DraftPolicy(make_proposer(_text(8, 5) + file[:-1] + [98, 11, 12],
                                       SpeculationParams(prediction=tuple(file))), FLAT, trees=False)
    policy.proposer.observe(file[:36])
    aligner = policy.proposer.parts()[0]
    assert aligner.available() == 4 and aligner.propose(64).tokens == file[36:]  # the prompt's copy ends otherwise


def test_the_first_draft_of_a_prediction_is_short_then_grows_once_the_reply_follows_it():
    """The reply's first tokens are rarely the file's (chat models open with a fence or a sentence), and the
    first draft rides on the prompt's pass: a long one cost +0.1–0.27 s time to first token against n-gram
    lookup on the real-edit bench. The start context has its own low, proper prior (mean 0.3: a Beta prior
    with the default pseudo-count would put its mass at α = 0)."""
    curve = CostModel({2: 1.23, 4: 1.30, 8: 1.42, 16: 1.68, 32: 2.28, 64: 3.38, 128: 5.87, 256: 10.58})
    prediction = tuple(range(1000, 1400))
    policy = DraftPolicy(make_proposer(list(range(300)), SpeculationParams(prediction=prediction)), curve)
    first = policy.decide(383, batch_tokens=285)
    assert first.chosen.context == "prediction/start" and 1 <= len(first.draft) <= 4
    assert policy.tracker("prediction/start").alpha == pytest.approx(0.3, abs=0.02)
    emitted = list(prediction[: len(first.draft) + 1])  # the reply does open with the file
    policy.record(first, emitted)
    policy.proposer.observe(emitted)
    second = policy.decide(383 - len(emitted))
    assert second.chosen.context == "prediction/aligned" and len(second.draft) >= 16


# ---- the fence lead-in ------------------------------------------------------------------------------------

NL, FENCE, LANG = 10, 20, 21
CLASSES = TokenClasses(newline=frozenset({NL}), fence=frozenset({FENCE}))
FP32_CURVE = CostModel({2: 1.23, 4: 1.30, 8: 1.42, 16: 1.68, 32: 2.28, 64: 3.38, 128: 5.87, 256: 10.58})


def test_lead_in_is_the_fence_line_before_the_prediction_in_the_prompt():
    file = _text(11, 40)
    instruction = [1, 2, 3, NL, NL]
    prompt = instruction + [FENCE, LANG, NL] + file + [NL, FENCE, NL]
    lead = LeadIn.fence(prompt, file, CLASSES)
    assert lead.propose(5).tokens == [FENCE, LANG, NL] + file[:2]
    assert LeadIn.fence(prompt, file, TokenClasses(newline=frozenset({NL}))) is None  # no fence tokens known
    assert LeadIn.fence(instruction + file, file, CLASSES) is None  # no fence before the file
    assert LeadIn.fence(instruction + [FENCE, LANG, NL, 5, 6, NL] + file, file, CLASSES) is None  # another line between
    assert LeadIn.fence(instruction + [FENCE, LANG, 7] + file, file, CLASSES) is None  # the file does not start a line
    second = [FENCE, 22, NL]
    assert LeadIn.fence(prompt + second + file, file, CLASSES).propose(3).tokens == second  # the last copy


def test_lead_in_follows_the_output_then_stops_for_good():
    lead = LeadIn([7, 8], [5, 6, 9])
    assert lead.propose(3).tokens == [7, 8, 5] and lead.context() == "prediction/lead"
    lead.observe([7, 8, 5])
    assert lead.propose(4).tokens == [6, 9] and lead.available() == 2
    lead.observe([4])
    assert lead.available() == 0 and lead.propose(4).tokens == []
    lead.observe([9])
    assert lead.available() == 0


def test_a_reply_that_opens_with_the_prompts_fence_is_drafted_from_its_first_token():
    """The prompt holds the file in a fence and the reply repeats the fence, then the file (8 of 9 replies on
    the real-edit bench). The first draft, riding on the prompt's last chunk, is the fence line and the file's
    first tokens; without the lead-in it was 1–4 of the file's tokens, rejected at the fence, and n-gram lookup
    took two more passes to find the file (seen in the trace)."""
    file = tuple(_text(12, 400))
    fence = [FENCE, LANG, NL]
    prompt = [1, 2, 3, NL, NL] + fence + list(file) + [NL, FENCE]
    reply = fence + list(file[:200]) + _text(13, 10) + list(file[200:])
    with_lead = DraftPolicy(make_proposer(prompt, SpeculationParams(prediction=file), CLASSES), FP32_CURVE)
    first = with_lead.decide(600, batch_tokens=285)
    assert first.chosen.context == "prediction/lead" and first.draft.tokens[:4] == fence + [file[0]]
    assert len(first.draft) >= 16
    without = DraftPolicy(make_proposer(prompt, SpeculationParams(prediction=file)), FP32_CURVE)
    assert without.decide(600, batch_tokens=285).draft.tokens[:1] != [FENCE]
    runs = {name: simulate_policy(DraftPolicy(make_proposer(prompt, SpeculationParams(prediction=file), classes),
                                              FP32_CURVE), reply)
            for name, classes in (("lead", CLASSES), ("none", None))}
    assert runs["lead"].passes < runs["none"].passes
    assert runs["lead"].cost < runs["none"].cost


def test_a_reply_without_the_fence_still_gets_the_prediction_at_once():
    """Where the reply opens with the file itself (e.g. a Markdown file, or "no code fences" asked), the lead-in
    is rejected at its first token and drafts nothing more; the aligner, which the reply follows, drafts long."""
    file = tuple(_text(14, 300))
    prompt = [1, 2, NL, NL, FENCE, LANG, NL] + list(file) + [NL, FENCE]
    policy = DraftPolicy(make_proposer(prompt, SpeculationParams(prediction=file), CLASSES), FP32_CURVE)
    first = policy.decide(400, batch_tokens=285)
    assert first.chosen.context == "prediction/lead"
    emitted = [file[0]]  # the target's own token: the file, not the fence
    policy.record(first, emitted)
    policy.proposer.observe(emitted)
    second = policy.decide(399)
    assert second.chosen.context == "prediction/aligned" and second.draft.tokens[:16] == list(file[1:17])
    assert all(o.context != "prediction/lead" for o in second.options)


OPENING = TokenClasses(newline=frozenset({NL, 11}), fence=frozenset({FENCE, 23}), bare_fence=frozenset({FENCE}),
                       line_break=NL)  # 11: a token holding a line break and more ("\n\n"); 23: "```python"


def test_token_classes_name_the_line_break_and_the_bare_fences():
    classes = TokenClasses.from_texts(["a", "\n", "```", "```py", " x\n", "~~~", "\n\n"])
    assert classes.line_break == 1 and classes.bare_fence == {2, 5} and classes.fence == {2, 3, 5}
    assert classes.newline == {1, 4, 6}


def test_token_classes_name_literal_values():
    texts = ["7", " 2024", "True", " false", "null", "x7", "1.5", "", " ", "Truth", "\u0667", "None"]
    assert TokenClasses.from_texts(texts).values == {0, 1, 2, 3, 4, 11}


def test_token_classes_from_a_tokenizer_are_those_of_its_batch_decode(monkeypatch):
    """The fast path (the Rust backend's batch decode) gives the classes of ``batch_decode``'s texts, and a
    tokenizer that cleans up spaces takes ``batch_decode`` itself."""
    from foretell.testing import make_tiny_tokenizer

    tokenizer = make_tiny_tokenizer()  # shared (cached): every change below is undone after the test
    monkeypatch.setattr(tokenizer, "clean_up_tokenization_spaces", False)
    want = TokenClasses.from_texts(tokenizer.batch_decode([[i] for i in range(len(tokenizer))]))
    assert want.newline and want.line_break is not None
    calls = []
    original = tokenizer.batch_decode
    monkeypatch.setattr(tokenizer, "batch_decode", lambda ids: calls.append(len(ids)) or original(ids))
    assert TokenClasses.from_tokenizer(tokenizer) == want and calls == []
    monkeypatch.setattr(tokenizer, "clean_up_tokenization_spaces", True)
    TokenClasses.from_tokenizer(tokenizer)
    assert calls == [len(tokenizer)]


def test_fence_opening_proposes_the_prediction_after_the_replys_fence_line():
    file = [5, 6, 7, 8]
    opening = FenceOpening.create(file, OPENING)
    assert opening.propose(4).tokens == [] and opening.available() == 0  # nothing before a fence line
    opening.observe([FENCE])
    assert opening.propose(4).tokens == []  # a bare fence: its language may follow
    opening.observe([LANG])
    assert opening.propose(3).tokens == [NL, 5, 6] and opening.context() == "prediction/lead"
    opening.observe([NL, 5])
    assert opening.propose(4).tokens == [6, 7, 8]
    opening.observe([9])  # the reply leaves the file: nothing more, ever
    assert opening.available() == 0
    opening.observe([NL, FENCE, LANG])
    assert opening.propose(4).tokens == []

    after_preamble = FenceOpening.create(file, OPENING)
    after_preamble.observe([1, 2, 3, 11, 23])  # "Here it is:\n\n```python"
    assert after_preamble.propose(2).tokens == [NL, 5]
    after_preamble.observe([11])  # a fence line ended by another line break: no following
    assert after_preamble.available() == 0

    once = FenceOpening.create(file, OPENING)
    once.observe([23, NL, 1, 2, NL, FENCE, LANG])  # the first fence line was not followed by the file
    assert once.available() == 0
    late = FenceOpening(file, OPENING, max_wait=4)
    late.observe([1, 2, NL, 3, 4, NL, 23])  # past the first max_wait tokens
    assert late.available() == 0
    assert FenceOpening.create([FENCE] + file, OPENING) is None  # a fenced prediction: the aligner follows it
    assert FenceOpening.create(file, CLASSES) is None  # no line-break token known


def test_fence_opening_with_the_prompts_fence_line_drafts_it_first_then_watches_for_the_replys_own():
    file = [5, 6, 7, 8]
    lead = [FENCE, LANG, NL]
    opening = FenceOpening.create(file, OPENING, lead)
    assert opening.propose(5).tokens == lead + file[:2]
    opening.observe([FENCE, 22])  # the reply's fence has another language
    assert opening.propose(3).tokens == [NL, 5, 6]
    opening.observe([NL, 5, 6])
    assert opening.propose(2).tokens == [7, 8]

    preamble = FenceOpening.create(file, OPENING, lead)
    preamble.observe([1, 2, 11])  # "Here it is:\n\n"
    assert preamble.available() == 0
    preamble.observe([FENCE, LANG])
    assert preamble.propose(2).tokens == [NL, 5]

    followed = FenceOpening.create(file, OPENING, lead)
    followed.observe(lead + [9])  # the fence line as drafted, then not the file: the aligner's business
    assert followed.available() == 0
    followed.observe([NL, FENCE, LANG])
    assert followed.available() == 0
    plain = FenceOpening.create(file, CLASSES, lead)  # no line-break token known: the plain lead-in
    assert type(plain) is LeadIn and plain.propose(4).tokens == lead + file[:1]

    big = tuple(_text(17, 40))
    proposer = make_proposer([1, NL, NL] + lead + list(big) + [NL, FENCE], SpeculationParams(prediction=big), OPENING)
    wired = proposer.parts()[1].part  # within PredictionEnd: the prompt holds the file
    assert isinstance(wired, FenceOpening) and wired.propose(5).tokens == lead + list(big[:2])


def test_a_reply_that_opens_a_fence_the_prompt_lacks_is_drafted_from_its_fence_line():
    """The prompt holds the file without a fence, the reply opens one anyway (the 0.5B did on 5 of 5 real
    edits asked that way): after the fence line's language the prediction drafts with the line break, where
    the language and the line break took a pass each and the aligner's line guess a short draft (11 passes
    against 8 with a fenced prompt)."""
    file = tuple(_text(15, 400))
    prompt = [1, 2, 3, NL, NL] + list(file) + [NL]
    reply = [FENCE, LANG, NL] + list(file) + [NL, FENCE]
    runs = {name: simulate_policy(DraftPolicy(make_proposer(prompt, SpeculationParams(prediction=file), classes),
                                              FP32_CURVE), reply)
            for name, classes in (("opening", OPENING), ("none", CLASSES))}
    assert runs["opening"].passes < runs["none"].passes
    assert runs["opening"].cost < runs["none"].cost


def test_engine_drafts_the_lead_in_and_stays_lossless():
    """Wiring and identity: the engine finds the lead-in with its token classes, its first step offers it, and
    the output equals plain decoding (the tiny model's reply does not follow it: a rejected lead-in)."""
    from foretell.config import EngineConfig, SamplingParams
    from foretell.engine.api import GenerationRequest
    from foretell.engine.llm_engine import LLMEngine
    from foretell.testing import make_tiny_model, make_tiny_tokenizer

    tok = make_tiny_tokenizer()
    engine = LLMEngine(make_tiny_model(seed=3), tok, EngineConfig(measure_cost_curve=False))
    backtick = tok.convert_tokens_to_ids("`")
    engine.token_classes = TokenClasses(engine.token_classes.newline, frozenset({backtick}))
    code = "def add(a, b):\n    return a + b\n"
    prompt = tok.encode("Fix it:\n\n```\n" + code + "```")
    greedy = SamplingParams(temperature=0.0)
    plain = engine.generate([GenerationRequest(prompt, 40, greedy, SpeculationParams(method="none"), request_id="p")])
    records = []
    engine.trace = records.append
    spec = SpeculationParams(prediction=tuple(tok.encode(code)))
    got = engine.generate([GenerationRequest(prompt, 40, greedy, spec, request_id="q")])
    assert [t for o in got["q"] for t in o.new_token_ids] == [t for o in plain["p"] for t in o.new_token_ids]
    assert "prediction/lead" in [o["context"] for o in records[0]["options"]]


def test_a_draft_ends_at_a_stop_token():
    """Lookup over a chat prompt runs from the file into the end of the user's turn (EOS) and on into the
    reply so far: nothing after the EOS can be accepted (the target stops there), so the draft ends with it.
    Parts that must run to draft are not asked for their draft up front."""
    eos = 99
    file = _text(15, 60)
    prompt = [1, 2] + file + [eos, 3, 4] + file[:30]  # ... file, end of turn, assistant header, the reply so far
    spec = SpeculationParams(method="ngram")
    policy = DraftPolicy(make_proposer(prompt, spec), FLAT, stop_ids={eos})
    for _ in range(4):
        policy.tracker("ngram/4").record(30, 30)  # lookup has been right all along
    policy.proposer.observe(file[30:50])  # the reply is near the file's end
    decision = policy.decide(room=64)
    assert decision.draft.tokens == file[50:] + [eos]
    unbounded = DraftPolicy(make_proposer(prompt + file[30:50], spec), FLAT)
    for _ in range(4):
        unbounded.tracker("ngram/4").record(30, 30)
    assert len(unbounded.decide(room=64).draft) > len(file[50:]) + 1

    class _Model(_Fixed):
        token_cost = 0.5

        def propose(self, k):
            raise AssertionError("a draft model is not run to find a stop token")

    assert DraftPolicy(_Model([eos], "draft_model"), FLAT, stop_ids={eos})._available(_Model([], "m"), 8) > 1


def test_engine_policies_stop_at_the_requests_stop_tokens():
    from foretell.config import EngineConfig, SamplingParams
    from foretell.engine.api import GenerationRequest
    from foretell.engine.llm_engine import LLMEngine
    from foretell.testing import make_tiny_model, make_tiny_tokenizer

    engine = LLMEngine(make_tiny_model(), make_tiny_tokenizer(), EngineConfig(measure_cost_curve=False))
    greedy = SamplingParams(temperature=0.0)
    engine.add_request(GenerationRequest([5, 6, 7], 8, greedy, SpeculationParams(), stop_token_ids=(42,)))
    assert engine.waiting[-1].policy.stop_ids == engine.eos_ids | {42} and engine.eos_ids
    engine.add_request(GenerationRequest([5, 6, 7], 8, greedy, SpeculationParams(), ignore_eos=True))
    assert engine.waiting[-1].policy.stop_ids == frozenset()


def _type_hinted(seed: int, functions: int = 12) -> tuple[list[int], list[int]]:
    """A file of methods and the model's reply adding type hints to every ``def`` line: the prediction's
    ``):\\n`` becomes ``: T) -> T:\\n``. Bodies are copied, and hold the same punctuation (``)``, ``:``),
    so re-entries on one or two matched tokens are easy to find and usually wrong inside a signature."""
    rng = random.Random(seed)
    indent, def_, lp, self_, comma, rp_colon_nl, colon, rp, arrow, colon_nl = range(30, 40)
    types = [40, 41, 42, 43]
    common = [rp, colon, lp, comma, self_, arrow, *types]

    def body() -> list[int]:
        return [indent, indent] + [rng.choice(common) if rng.random() < 0.35 else rng.randrange(100, 3000)
                                   for _ in range(rng.randrange(6, 14))] + [NL]

    pred, out = [], []
    for _ in range(functions):
        head = [indent, def_, rng.randrange(3000, 5000), lp, self_, comma, rng.randrange(3000, 5000)]
        pred += head + [rp_colon_nl]
        out += head + [colon, rng.choice(types), rp, arrow, rng.choice(types), colon_nl]
        for _ in range(rng.randrange(2, 5)):
            line = body()
            pred += line
            out += line
        pred.append(NL)
        out.append(NL)
    return pred, out


def test_tentative_reentries_learn_their_own_acceptance():
    """Re-entries backed by fewer than ``anchored_evidence`` matched tokens draft in a context of their own
    (``prediction/tentative``): inside signatures being rewritten they are refused, while re-entries on longer
    matches run on through the copied bodies; one estimate for both drafted long where it failed (the 1.5B's
    type-hints edit drafted 13-20 tokens there). Priced with the 2-core Xeon's fp32 curve (0.5B)."""
    from foretell.core.aligner import AlignerConfig
    from foretell.core.ngram import NgramProposer
    from foretell.core.prediction import PredictionProposer

    xeon = CostModel({2: 1.01, 3: 1.06, 4: 1.57, 8: 1.70, 16: 2.06, 32: 2.75, 64: 4.23, 128: 6.91})
    cost = {0: 0.0, 3: 0.0}
    contexts = set()
    for seed in range(8):
        pred, out = _type_hinted(seed)
        prompt = [1, 2, NL] + pred + [NL]
        for evidence in cost:
            proposer = PredictionProposer(pred, None, NgramProposer(prompt),
                                          config=AlignerConfig(anchored_evidence=evidence), newline_ids={NL})
            policy = DraftPolicy(proposer, xeon)
            cost[evidence] += simulate_policy(policy, out).cost
            if evidence:
                contexts |= set(policy.trackers)
    assert {"prediction/tentative", "prediction/anchored"} <= contexts
    assert cost[3] < 0.96 * cost[0]


def test_priors_of_the_contexts_after_a_departure_fit_what_they_reach_on_recorded_outputs():
    """Replayed on the 38 recorded 0.5B outputs (shipped token ids, the file in the prompt), the measured priors
    of "prediction/guess", "prediction/tentative" and "ngram/1" cost less than the flat 0.6 they replaced, with
    the prediction (measured 0.984x) and with n-gram lookup alone (0.978x); Xeon fp32 curve."""
    import json
    from importlib import resources

    from foretell.core.policy import PRIORS

    xeon = CostModel({2: 1.01, 3: 1.06, 4: 1.57, 8: 1.70, 16: 2.06, 32: 2.75, 64: 4.23, 128: 6.91})
    flat = {**PRIORS, "prediction/guess": 0.6, "prediction/tentative": 0.6, "ngram/1": 0.6}
    data = json.loads(resources.files("foretell.bench").joinpath("data/recorded_outputs.json").read_text())
    cost = {}
    for name, priors in (("measured", PRIORS), ("flat", flat)):
        for method in ("auto", "ngram"):
            total = 0.0
            for task in data["tasks"]:
                prompt = [1, 2, 3] + task["prediction_ids"] + [4]
                spec = SpeculationParams(prediction=tuple(task["prediction_ids"]), method=method)
                total += simulate_policy(DraftPolicy(make_proposer(prompt, spec), xeon, priors=priors),
                                         task["output_ids"]).cost
            cost[name, method] = total
    assert cost["measured", "auto"] < 0.99 * cost["flat", "auto"]
    assert cost["measured", "ngram"] < 0.99 * cost["flat", "ngram"]


def test_longer_ngram_matches_make_lookup_cheaper_on_recorded_outputs(monkeypatch):
    """Replayed on the 38 recorded 0.5B outputs (the file in the prompt), n-gram lookup alone costs less
    when it matches up to 16 tokens than with at most 4 (measured 0.856x; Xeon fp32 curve): a repeated
    4-token snippet's latest occurrence is often the wrong place in the file."""
    import functools
    import json
    from importlib import resources

    import foretell.core.prediction as prediction
    from foretell.core.ngram import NgramProposer

    xeon = CostModel({2: 1.01, 3: 1.06, 4: 1.57, 8: 1.70, 16: 2.06, 32: 2.75, 64: 4.23, 128: 6.91})
    data = json.loads(resources.files("foretell.bench").joinpath("data/recorded_outputs.json").read_text())

    def total() -> float:
        cost = 0.0
        for task in data["tasks"]:
            prompt = [1, 2, 3] + task["prediction_ids"] + [4]
            policy = DraftPolicy(make_proposer(prompt, SpeculationParams(method="ngram")), xeon)
            cost += simulate_policy(policy, task["output_ids"]).cost
        return cost

    long = total()
    monkeypatch.setattr(prediction, "NgramProposer", functools.partial(NgramProposer, max_n=4))
    assert long < 0.9 * total()


def test_a_fresh_reanchor_drafts_short_until_the_output_follows_it():
    """A long aligned run trains "prediction/aligned" towards 1; a re-anchor inside text the model is writing
    anew (here a 4-token phrase of the prediction that the output then leaves) drafts from
    "prediction/reanchored" with its own estimate, so it proposes a short draft where the aligned estimate
    proposed dozens of tokens (as on the 1.5B's Markdown edit: 68 rejected tokens at 5.8x a one-token pass
    on the Zen 4)."""
    from foretell.core.aligner import AlignerConfig
    from foretell.core.prediction import PredictionProposer

    zen4 = CostModel({2: 1.09, 4: 1.24, 8: 1.53, 16: 1.98, 32: 3.3, 64: 4.75, 128: 9.31})
    pred = _text(11, 400)
    output = pred[:200] + _text(12, 30) + pred[300:304] + _text(13, 10)
    drafts = {}
    for confirm in (0, 4):
        proposer = PredictionProposer(pred, None, config=AlignerConfig(confirm_tokens=confirm))
        policy = DraftPolicy(proposer, zen4)
        _generate(policy, proposer, output, 234)  # up to the spurious re-anchor: the same for both
        decision = policy.decide(128)
        drafts[confirm] = (decision.chosen.context, len(decision.draft.tokens))
    assert drafts[0][0] == "prediction/aligned" and drafts[0][1] >= 32
    assert drafts[4][0] == "prediction/reanchored" and drafts[4][1] <= drafts[0][1] // 3


def test_a_reply_that_quotes_the_file_drafts_its_quotes_short():
    """An explanation of the file (prose, then a quote of it that the reply soon leaves) with the file as the
    prediction: the reply's first anchor is trusted at once (a preamble before the file looks the same), and on
    the aligned estimate, whose prior is near 1, it drafted 28 tokens of which one was kept (Cascade Lake, fp32:
    4.4 one-token passes). With most of the output off the prediction, the aligner names it
    "prediction/quote", with an estimate of its own: a short draft."""
    from foretell.core.aligner import AlignerConfig
    from foretell.core.prediction import PredictionProposer

    cascade_lake = CostModel({2: 1.11, 4: 1.36, 8: 2.06, 16: 2.83, 32: 4.72, 64: 9.09, 128: 18.75})
    pred = _text(21, 600)
    output = _text(22, 60) + pred[300:306] + _text(23, 20)  # 60 tokens of prose, a 6-token quote
    drafts = {}
    for share in (0.0, 0.3):
        proposer = PredictionProposer(pred, None, config=AlignerConfig(quote_share=share))
        policy = DraftPolicy(proposer, cascade_lake)
        _generate(policy, proposer, output, 64)  # up to 4 tokens into the quote: the anchor
        decision = policy.decide(128)
        drafts[share] = (decision.chosen.context, len(decision.draft.tokens))
    assert drafts[0.0][0] == "prediction/aligned" and drafts[0.0][1] >= 16
    assert drafts[0.3][0] == "prediction/quote" and drafts[0.3][1] <= 4


def test_the_policy_prices_a_draft_at_the_requests_context():
    """``decide`` takes the request's context: a perfect prediction drafts less after many keys where each
    key makes every draft token dearer, and the decision's cost is the pass's at that context."""
    target = _text(11, 400)
    model = CostModel({8: 1.5, 64: 6.0}, AttentionCost(per_pass=1e-4, per_token=2e-3, reference=0))
    drafts = {}
    for context in (10, 3000):
        proposer = make_proposer(_text(1, 50), SpeculationParams(prediction=target))
        policy, pos = DraftPolicy(proposer, model), 0
        for _ in range(3):  # a few accepted drafts: the prediction's estimate rises
            decision = policy.decide(128, context=context + pos)
            emitted = target[pos : pos + len(decision.draft.tokens) + 1]
            policy.record(decision, emitted)
            proposer.observe(emitted)
            pos += len(emitted)
        decision = policy.decide(128, context=context)
        drafts[context] = len(decision.draft.tokens)
        assert decision.cost == pytest.approx(model.at(context).ratio(drafts[context] + 1))
    assert drafts[10] > drafts[3000] >= 1


def test_past_the_predictions_end_a_skipped_block_is_guessed_short():
    """A reply that leaves out the file's header (a licence comment) and copies the rest: at the prediction's
    end the aligner guesses that the header comes now (a moved block). That guess is "prediction/moved", not
    "prediction/aligned": on the aligned estimate (near 1 after the copy) it drafted 95 tokens of which none
    could be kept, a pass of 28 one-token passes on an AMD EPYC's curve (1.2 s of a 16.6 s Go file reply)."""
    from foretell.core.prediction import PredictionProposer

    zen3 = CostModel({2: 1.24, 4: 1.60, 8: 2.50, 16: 4.04, 32: 8.35, 64: 14.05, 96: 18.62, 97: 21.73, 128: 27.41})
    header, body = _text(31, 40), _text(32, 500)
    output = body + _text(33, 5)  # the body copied, then the reply's own end (a closing fence, say)
    proposer = PredictionProposer(header + body, None)
    policy = DraftPolicy(proposer, zen3)
    _generate(policy, proposer, output, len(body))
    decision = policy.decide(128)
    assert proposer.aligner.aligned and proposer.aligner.position == 0  # the header guessed next
    assert decision.chosen.context == "prediction/moved"
    assert 0 < len(decision.draft.tokens) <= 4


def test_a_moved_block_guessed_past_the_end_is_followed_once_the_output_takes_it():
    """The guess is right where the block really moved to the end: the output that follows it re-anchors
    there and drafts the rest of it aligned."""
    from foretell.core.prediction import PredictionProposer

    zen3 = CostModel({2: 1.24, 4: 1.60, 8: 2.50, 16: 4.04, 32: 8.35, 64: 14.05, 96: 18.62, 97: 21.73, 128: 27.41})
    block, body = _text(34, 60), _text(35, 400)
    output = body + block + _text(36, 200)
    proposer = PredictionProposer(block + body, None)
    policy = DraftPolicy(proposer, zen3)
    _generate(policy, proposer, output, len(body) + 12)
    decision = policy.decide(128)
    assert decision.chosen.context == "prediction/aligned"
    assert decision.draft.tokens[:8] == output[len(body) + 12:len(body) + 20]
