"""The draft policy: per request and step, which source drafts and how many tokens it proposes.

A request's proposer has one or more *parts* (single-source proposers: the prediction aligner, n-gram
lookup, ...). Each step every part that can draft is scored on the expected tokens its draft adds, less
the pass time the draft adds valued at the rate λ the request could otherwise get,

    score(part, k) = E_part[(1 − α^(k+1)) / (1 − α)] − 1 − λ · (ratio(B + k + 1) − ratio(B + 1))

(:func:`foretell.core.adaptive_k.net_gain`; B = tokens already in the pass, the request's own prompt chunk
included; λ = the best part's expected tokens per unit time in a pass of its own, or the shared pass's rate
if higher). For a request alone this picks exactly the draft with the most expected tokens per unit time;
beside a prompt chunk it keeps a cheap-looking long draft from riding on the prefill. α is estimated per part
*and per context* (the state it drafts from: the aligner aligned, re-anchored or guessing; n-gram lookup by
the length of its match), and the best part drafts. Parts that did not draft still learn: what they would have proposed is compared with
the tokens the target emitted (counterfactual evidence, free), so a failing source never starves a working
one and a source that becomes useful again is noticed at once.

Example (prediction + n-gram fallback, file in the prompt, the output has left the prediction)::

    policy = DraftPolicy(make_proposer(prompt, SpeculationParams(prediction=pred)), cost)
    d = policy.decide(room=64)       # d.source == "ngram" while its matches keep being accepted
    policy.record(d, emitted)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Sequence

import numpy as np

from foretell.core.adaptive_k import AcceptanceTracker, ContextCost, CostModel, choose_k, net_gain, pass_rate
from foretell.core.draft import EMPTY_DRAFT, Draft, Proposer


# Prior mean acceptance per context (then per source; 0.6 otherwise), before any evidence of this request.
# The prediction's first draft (the output's first tokens) rides on the prompt's last chunk and is usually
# wrong: chat models open a reply with a code fence or a sentence, not with the file (in a real-edit run 8 of
# 9 replies did), and a long rejected first draft showed as +0.1–0.27 s time to first token against n-gram
# lookup. A low prior keeps it short; once it is accepted, "prediction/aligned" drafts long. Where the prompt
# holds the prediction in a code fence, the fence line and then the prediction ("prediction/lead") is what such
# replies open with (8 of those 9): a high prior drafts ~25 tokens on the prompt's last chunk (fp32 CPU curve),
# where a rejection costs about a quarter of a one-token pass. A value is the prior mean, or (mean,
# pseudo-count) where the default count of 2 would put the Beta prior's mass at α = 0.
# Contexts that draft after the output left the prediction start near what they were measured to reach: over
# the 38 recorded outputs and 7 real-edit outputs (0.5B, greedy), the per-token acceptance of the steps that
# drafted was 0.125 for "prediction/guess", 0.46 for "prediction/tentative" and 0.28 for "ngram/1" (short
# matches), against 0.6 assumed before; replayed with these priors (simulate_policy, three cost curves) the
# prediction's cost fell 1.2-1.6% (geomean; JS modernise 35.5 -> 34.2 units, rename 60.0 -> 56.3 on the 0.5B's
# curve) and n-gram lookup's alone 2-5%. As n-gram lookup gains more, the prediction's ratio to it fell (0.5B
# curve: geomean 1.266 -> 1.243, worst output 0.902 -> 0.881); with the two prediction priors alone it rose.
# "prediction/reanchored" (aligned again after a re-anchor, fewer than 4 tokens confirmed) at (0.75, 4),
# replayed on the 18 real-edit outputs of the 0.5B and 1.5B and the 38 recorded ones with their prompts: the
# prediction's geomean over n-gram lookup alone went 1.097 -> 1.098 (0.5B's Zen 4 curve), 1.081 -> 1.086
# (1.5B's), 1.250 -> 1.247 (a flat GPU-like curve) against drafting such steps as "prediction/aligned";
# priors of 0.6 and 0.85 did less. The 1.5B's Markdown edit (engine, 2 runs): 0.95-0.98x n-gram -> 1.00-1.07x.
# "prediction/rejoin" (the line an inserted block left, guessed after a block closing the way an earlier one did,
# e.g. a docstring's quotes) at (0.8, 4): replayed on those 36 real-edit outputs (4 runs: 0.5B and 1.5B, Sapphire
# Rapids and EPYC curves) the docstring edits went 0.976-1.128x -> 1.035-1.162x n-gram lookup alone; 0.6 and 0.9
# did a little less. As a "prediction/tentative" guess, its estimate was the one the block's wrong line guesses
# trained, and n-gram lookup drafted instead (the body of another function after its docstring).
# "prediction/line" (the next line, guessed when the output closes a line it left in its middle, e.g. a def line
# given type hints) at (0.6, 4): the 1.5B's type hints went 1.150x -> 1.336x (Sapphire Rapids' curve) and
# 1.112x -> 1.161x (EPYC's), JS modernise 1-1.5% down (its next lines are edited too), all 36 1.1536 -> 1.1588;
# 0.45 and 0.8 did a little less. Until then such steps drafted 3 tokens as "prediction/tentative" (the 1.5B's
# curve on Sapphire Rapids steps from 1.37 to 1.87 one-token passes at 5 tokens) and re-anchored a step later.
# "prediction/block" (the prediction line guessed at an output line break inside new lines, where the output
# may return to the prediction) at (0.2, 4): these guesses fail at every line break but the one that ends the
# block, and they shared "prediction/tentative" with re-entries backed by one or two matched tokens, whose
# estimate they pulled down. Replayed on the 84 recorded outputs (six cost curves) with their own context: cost
# x0.993 (geomean), passes 4385 -> 4349, the ratio to n-gram lookup alone 1.147 -> 1.155; best JS modernise on
# the 1.5B (105 -> 98 passes), worst a 1.5B docstring edit on EPYC (122 -> 124); (0.3, 4) and (0.5, 4) did a
# little less, and a context of its own for blank lines (a paragraph's end) nothing more.
# "prediction/quote" (a draft inside a reply that mostly leaves the prediction: an explanation quoting the file;
# see AlignerConfig) at (0.5, 4): 0.35 and 0.65 did the same within 0.1% in the replay (replay_quote.py).
# "prediction/moved" (the output passed the prediction's end after jumping over a block of it: the block may come
# now, moved) at (0.5, 4): it drafted as "prediction/aligned" until 2026-11-29, 95 tokens at an estimate of 0.99.
# Where the jumped block was a licence header the reply left out (2 of 14 held-out-like requests, Go files
# copied), none could be accepted and that pass cost 28 one-token passes on an AMD EPYC's curve: 1.2 s of 16.6.
# In the engine there (2 rounds each) the reply's decode went 16.6-16.7 s -> 14.2-14.5 s with the prediction, against
# 14.4-16.0 s with n-gram lookup alone. Replayed on the bench's 20 recorded outputs: unchanged but for the port
# (cost 336.9 -> 337.2 one-token passes). 0.3 and 0.7 replayed the same on the 14 held-out-like outputs.
PRIORS: dict[str, float | tuple[float, float]] = {
    "prediction/start": (0.3, 4.0), "prediction/lead": (0.8, 4.0), "prediction/aligned": 0.9,
    "prediction/reanchored": (0.75, 4.0),
    "prediction/guess": (0.15, 4.0), "prediction/tentative": (0.45, 4.0), "prediction/rejoin": (0.8, 4.0), "prediction/line": (0.6, 4.0),
    "prediction/block": (0.2, 4.0), "prediction/quote": (0.5, 4.0), "prediction/moved": (0.5, 4.0),
    "ngram/4": 0.8, "ngram/3": 0.7, "ngram/1": (0.3, 4.0)}


@dataclass
class Option:
    """One part's best offer this step: its context, draft size k (0 = none), score and estimate."""

    part: Proposer
    context: str
    k: int
    score: float  # net expected tokens over plain decoding, pass time paid at the step's rate
    alpha: float
    limit: int  # the most it could have proposed (room, available, cap)


@dataclass
class Decision:
    """What the policy chose for one step (the draft, who made it and why) and the alternatives."""

    draft: Draft = field(default_factory=Draft)
    chosen: Option | None = None
    options: list[Option] = field(default_factory=list)
    expected: float = 1.0  # tokens this request is expected to emit from the pass (1 = plain decoding)
    cost: float = 1.0  # the pass's cost ratio t(n)/t(1) with this draft
    branch: Draft | None = None  # a second candidate verified in the same pass (a token tree)
    branch_option: Option | None = None
    rate: float = 1.0  # λ: tokens per one-token-pass time the draft had to beat

    def tree(self) -> tuple[list[int], list[int] | None, list[tuple[Draft, list[int]]]]:
        """The draft as the pass lays it out: (node tokens, their parents or None for a plain chain, per
        branch (draft, its node indices)). The main draft is nodes 0..k-1; a branch shares the main draft's
        nodes up to where it departs, then continues with nodes of its own."""
        main = self.draft.tokens
        if self.branch is None:
            return main, None, [(self.draft, list(range(len(main))))]
        shared = common_prefix(main, self.branch.tokens)
        suffix = self.branch.tokens[shared:]
        parents = [i - 1 for i in range(len(main))]
        parents += [shared - 1 if i == 0 else len(main) + i - 1 for i in range(len(suffix))]
        branch_path = list(range(shared)) + [len(main) + i for i in range(len(suffix))]
        return main + suffix, parents, [(self.draft, list(range(len(main)))), (self.branch, branch_path)]

    @property
    def source(self) -> str:
        return self.draft.source if self.draft.tokens else "none"


class DraftPolicy:
    """Chooses each step's draft for one request among its proposer's parts (see the module docstring).

    ``adaptive=False`` drafts as much as the best-scoring part may (room, available, cap): fixed-k
    speculation, for comparison.
    """

    def __init__(self, proposer: Proposer | None, cost: CostModel, adaptive: bool = True,
                 priors: dict[str, float | tuple[float, float]] | None = None, trees: bool = True,
                 stop_ids: Collection[int] = ()):
        self.proposer = proposer
        self.cost = cost
        self.adaptive = adaptive
        self.trees = trees
        self.priors = PRIORS if priors is None else priors
        self.stop_ids = frozenset(stop_ids)
        self.trackers: dict[str, AcceptanceTracker] = {}

    def tracker(self, context: str) -> AcceptanceTracker:
        found = self.trackers.get(context)
        if found is None:
            prior = self.priors.get(context, self.priors.get(context.split("/")[0], 0.6))
            mean, weight = prior if isinstance(prior, tuple) else (prior, 2.0)
            found = self.trackers[context] = AcceptanceTracker(prior_alpha=mean, prior_weight=weight)
        return found

    def decide(self, room: int, batch_tokens: int = 0, batch_expected: float = 0.0, context: int = 0) -> Decision:
        """The draft for this step: at most ``room`` tokens, given ``batch_tokens`` the pass holds besides
        (other requests' tokens: those scheduled before this one, and at least the pending token of each
        decoding request after it; this request's pending tokens beyond the first) expected to yield
        ``batch_expected`` tokens. ``context``: the request's tokens so far; each draft token attends to all
        of them (:meth:`CostModel.at`)."""
        cost = self.cost.at(context)
        if self.proposer is None or room <= 0:
            return Decision(cost=cost.ratio(batch_tokens + 1))
        parts = [(part, self._available(part, room)) for part in self.proposer.parts()]
        parts = [(part, available) for part, available in parts if available > 0]
        if not parts:
            return Decision(cost=cost.ratio(batch_tokens + 1))
        rate = max(pass_rate(self.tracker(part.context()).expected_tokens(self._limit(part, available)),
                             cost, batch_tokens, batch_expected) for part, available in parts)
        options = [self._option(part, available, room, batch_tokens, batch_expected, rate, cost)
                   for part, available in parts]
        best = max(options, key=lambda o: (o.k > 0, o.score))  # first part wins ties
        draft = best.part.propose(best.k) if best.k > 0 else EMPTY_DRAFT
        expected = float(self.tracker(best.context).expected_tokens(len(draft))[-1])
        decision = Decision(draft, best, options, expected, cost.ratio(batch_tokens + len(draft) + 1), rate=rate)
        if self.trees and self.adaptive and draft.tokens and draft.probs is None:  # trees: one-hot drafts only
            for other in sorted((o for o in options if o is not best and o.part.token_cost == 0.0),
                                key=lambda o: -o.score):
                if self._add_branch(decision, other, room, batch_tokens, cost):
                    break
        return decision

    def would_choose(self, part: Proposer, available: int, room: int, context: int = 0, catch_up: int = 1,
                     optional: bool = False) -> bool:
        """Whether ``part``, which must first run to have a draft (a draft model), should: its best draft of
        1..``available`` tokens, priced with its own drafting time (``part.token_cost`` per token, its first pass
        over the ``catch_up`` tokens it has not seen: the prompt at first, then each run of tokens another part
        drafted; priced on the target's curve, scaled by ``token_cost``), beats every other part's best draft
        (those are free once made). Where no other part would draft it runs: the request asked for the draft
        model, so plain decoding is not the alternative; unless it is ``optional`` (the request brought a
        prediction, its main source), when it must also beat plain decoding. Alone in a pass.

        Until 2026-12-01 the catch-up was not priced and a drafter beside a prediction ran wherever no other
        part drafted. On the 1.5B's held-out-like type hints (Zen 4) its first passes fed the prompt (4.3 s) and
        a run of 360 tokens the prediction had drafted (1.1 s) for 2 drafts of 3 tokens: 24.4 s against 19.0
        with the prediction alone."""
        limit = min(room, available)
        if limit <= 0:
            return False
        others = [(p, self._available(p, room)) for p in self.proposer.parts() if p is not part]
        others = [(p, n) for p, n in others if n > 0]
        if not self.adaptive:  # fixed-k speculation
            return True
        cost = self.cost.at(context)
        expected = self.tracker(part.context()).expected_tokens(limit)
        ks = np.arange(limit + 1, dtype=np.float64)
        priced = cost.span(1, limit + 1) + part.token_cost * ks
        priced[1:] += part.token_cost * (cost.ratio(max(catch_up, 1)) - 1.0)  # its first pass feeds the catch-up
        rate = max([float(np.max(expected / priced))] + [
            pass_rate(self.tracker(p.context()).expected_tokens(self._limit(p, n)), cost) for p, n in others])
        mine = float(np.max((expected - 1.0 - rate * (priced - priced[0]))[1:]))
        drafting = [o.score for o in (self._option(p, n, room, 0, 0.0, rate, cost) for p, n in others) if o.k > 0]
        if not drafting:
            return not optional or mine > 0.0  # 0: plain decoding's
        return mine > max(drafting)

    def _add_branch(self, decision: Decision, other: Option, room: int, batch_tokens: int,
                    cost: CostModel | ContextCost) -> bool:
        """Add ``other``'s draft as a second branch when its expected tokens pay for its pass time.

        Where the two drafts part (after a shared prefix of j tokens) at most one is right. The branch adds
        tokens only when the main draft is accepted up to j and rejected there, while the branch's token is
        the target's: probability α_A^j · min(1 − α_A, α_B) (per-token estimates α of the two contexts), or
        α_A^j · α_B where the other draft continues past the end of the main one (j = its length); it
        then yields the expected accepted run of its next L tokens, Σ_{i<L} α_B^i, at the cost of L more
        tokens in the pass, paid at the step's rate λ.
        """
        main = decision.draft.tokens
        would = other.part.propose(other.limit).tokens
        shared = common_prefix(main, would)
        spare = room - len(main)
        longest = min(len(would) - shared, spare)
        if longest <= 0:
            return False
        alpha_a = self.tracker(decision.chosen.context).alpha
        alpha_b = self.tracker(other.context).alpha
        if shared == len(main):  # the other draft goes on where the main one stops (e.g. past the prediction's end)
            p_switch = alpha_a**shared * alpha_b
        else:
            p_switch = alpha_a**shared * min(1.0 - alpha_a, alpha_b)
        sizes = np.arange(1, longest + 1)
        gain = p_switch * np.cumsum(alpha_b ** (sizes - 1.0))
        before = batch_tokens + len(main) + 1
        net = gain - decision.rate * (cost.span(before + 1, longest) - cost.ratio(before))
        best = int(np.argmax(net))
        if net[best] <= 0.0:
            return False
        decision.branch = Draft(would[: shared + best + 1], None, other.part.active_source())
        decision.branch_option = other
        decision.expected += float(gain[best])
        decision.cost = cost.ratio(before + best + 1)
        return True

    def _available(self, part: Proposer, room: int) -> int:
        """How many tokens ``part`` may draft this step: at most ``room``, and never past a stop token (EOS):
        the target stops there, so nothing after it can be accepted. Lookup over a chat prompt runs into the
        end of the user's turn right after the file (seen on the real-edit bench: 89- and 128-token drafts of
        which 11 and 50 tokens could count). Parts that must run to draft (a draft model) are not asked."""
        available = min(room, part.available())
        if self.stop_ids and available > 0 and part.token_cost == 0.0:
            would = part.propose(available).tokens
            stop = next((i for i, token in enumerate(would) if token in self.stop_ids), None)
            if stop is not None:
                available = stop + 1
        return available

    @staticmethod
    def _limit(part: Proposer, available: int) -> int:
        cap = part.suggested_cap()
        return min(available, cap) if cap is not None else available

    def _option(self, part: Proposer, available: int, room: int, batch_tokens: int, batch_expected: float,
                rate: float, cost: CostModel | ContextCost) -> Option:
        context = part.context()
        tracker = self.tracker(context)
        limit = self._limit(part, available)
        if self.adaptive:
            k = choose_k(tracker, cost, room, available, part.suggested_cap(), batch_tokens, batch_expected, rate)
        else:
            k = limit
        expected = tracker.expected_tokens(k)
        score = float(net_gain(expected, cost, rate, batch_tokens)[-1])
        return Option(part, context, k, score, tracker.alpha, limit)

    def record(self, decision: Decision, emitted: Sequence[int]) -> None:
        """Learn from one verified step's ``emitted`` tokens (call before the proposer observes them): each
        part from how much of what it drafted, or would have drafted, equals them. (Only a part that drafted
        is rejected by the target itself; for the others the emitted tokens tell the same: the target's token
        where their draft departs.)"""
        chosen = decision.chosen
        for option in decision.options:
            if option is chosen and decision.draft.tokens:
                would = decision.draft.tokens
            elif option is decision.branch_option:
                would = decision.branch.tokens
            else:
                would = option.part.propose(min(option.limit, len(emitted))).tokens
            if would:
                matched = common_prefix(would, emitted)
                self.tracker(option.context).record(min(len(would), len(emitted)), matched)
            elif option is chosen:
                self.tracker(option.context).record(0, 0)  # an idle step: counts towards the next probe


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i

