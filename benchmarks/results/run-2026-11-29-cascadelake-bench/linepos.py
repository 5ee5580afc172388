"""Replay: acceptance split by line position (first two tokens of a line vs the rest) for chosen contexts."""
import math, sys, collections
import numpy as np
sys.path.insert(0, "benchmarks/results/run-2026-11-29-cascadelake-bench")
from items import load, classes, eos, PANELS, SPR
import foretell.core.prediction as prediction
import foretell.core.simulate as sim
from foretell.core.policy import DraftPolicy, PRIORS, Option, common_prefix
from foretell.core.adaptive_k import net_gain, pass_rate, AcceptanceTracker
from foretell.config import SpeculationParams
NL = classes.newline
SPLIT = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else {"prediction/aligned", "prediction/reanchored"}
HEAD = int(sys.argv[3]) if len(sys.argv) > 3 else 2
SPRIOR = (float(sys.argv[4]), 4.0) if len(sys.argv) > 4 else (0.97, 4.0)

class LinePolicy(DraftPolicy):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.tail = []  # output so far
    def _classes(self, draft):
        # True where the draft token is among the first HEAD tokens of a line
        seq_tail = self.tail[-HEAD:] if self.tail else []
        res = []
        run = None
        # tokens since last newline at the draft start
        n = 0
        for t in reversed(self.tail):
            if t in NL: break
            n += 1
            if n > HEAD: break
        if not self.tail: n = 0
        for t in draft:
            res.append(n < HEAD)
            n = 0 if t in NL else n + 1
        return res
    def _exp(self, context, draft, limit):
        tr = self.tracker(context)
        base = tr.expected_tokens(limit)
        if context not in SPLIT or not draft:
            return base
        st = self.tracker(context + "@start")
        a_s = st.alpha
        powers = np.diff(base, prepend=0.0)  # E[α^i], i = 0..limit
        cls = self._classes(draft[:limit])
        out = [1.0]; nm = 0; ns = 0
        for i in range(1, limit + 1):
            c = cls[i - 1]
            if c: ns += 1
            else: nm += 1
            out.append(out[-1] + powers[nm] * a_s**ns)
        return np.array(out)
    def tracker(self, context):
        found = self.trackers.get(context)
        if found is None and context.endswith("@start"):
            found = self.trackers[context] = AcceptanceTracker(prior_alpha=SPRIOR[0], prior_weight=SPRIOR[1])
        return super().tracker(context)
    def decide(self, room, batch_tokens=0, batch_expected=0.0):
        from foretell.core.policy import Decision, EMPTY_DRAFT
        if self.proposer is None or room <= 0:
            return Decision(cost=self.cost.ratio(batch_tokens + 1))
        parts = [(part, self._available(part, room)) for part in self.proposer.parts()]
        parts = [(part, a) for part, a in parts if a > 0]
        if not parts:
            return Decision(cost=self.cost.ratio(batch_tokens + 1))
        drafts = {id(part): part.propose(self._limit(part, a)).tokens for part, a in parts}
        rate = max(pass_rate(self._exp(part.context(), drafts[id(part)], self._limit(part, a)), self.cost, batch_tokens, batch_expected) for part, a in parts)
        options = []
        for part, a in parts:
            ctx = part.context(); limit = self._limit(part, a)
            e = self._exp(ctx, drafts[id(part)], limit)
            g = net_gain(e, self.cost, rate, batch_tokens)
            k = int(np.argmax(g))
            if k == 0:
                k = self.tracker(ctx).probe_size(self.cost, limit)
            options.append(Option(part, ctx, k, float(g[k]), self.tracker(ctx).alpha, limit))
        best = max(options, key=lambda o: (o.k > 0, o.score))
        draft = best.part.propose(best.k) if best.k > 0 else EMPTY_DRAFT
        return Decision(draft, best, options, 1.0, self.cost.ratio(batch_tokens + len(draft) + 1), rate=rate)
    def record(self, decision, emitted):
        chosen = decision.chosen
        for option in decision.options:
            if option is chosen and decision.draft.tokens:
                would = decision.draft.tokens
            else:
                would = option.part.propose(min(option.limit, len(emitted))).tokens
            if would:
                n = min(len(would), len(emitted)); matched = common_prefix(would, emitted)
                if option.context in SPLIT:
                    cls = self._classes(would[:n])
                    upto = cls[:matched + (1 if matched < n else 0)]
                    ms = sum(cls[:matched]); mm = matched - ms
                    miss_start = matched < n and cls[matched]
                    miss_mid = matched < n and not cls[matched]
                    if mm + miss_mid: self.tracker(option.context).record(mm + miss_mid, mm)
                    if ms + miss_start: self.tracker(option.context + "@start").record(ms + miss_start, ms)
                else:
                    self.tracker(option.context).record(n, matched)
            elif option is chosen:
                self.tracker(option.context).record(0, 0)
        self.tail.extend(emitted)

gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
cname = sys.argv[1] if len(sys.argv) > 1 else "panels"
curve = {"panels": PANELS, "spr": SPR}[cname]
items = load(curve)
rs = collections.defaultdict(list)
for g, name, prompt, pred, out, _ in items:
    c = {}
    for label, cls, m in (("ngram", DraftPolicy, "ngram"), ("base", DraftPolicy, "auto"), ("line", LinePolicy, "auto")):
        spec = SpeculationParams(prediction=pred if m == "auto" else None, method=m)
        p = cls(prediction.make_proposer(prompt, spec, classes), curve, priors=PRIORS, stop_ids={eos}, trees=False)
        c[label] = sim.simulate_policy(p, out).cost
    rs["base"].append(c["ngram"] / c["base"]); rs["line"].append(c["ngram"] / c["line"])
    rs["delta"].append(c["base"] / c["line"])
print(cname, SPLIT, HEAD, SPRIOR, " ".join(f"{k}: {gm(v):.4f} (min {min(v):.3f}, max {max(v):.3f})" for k, v in rs.items()))
