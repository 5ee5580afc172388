"""Prototypes of the draft policy for the replays of corpus.py (VARIANT=a+b+...): each v_NAME patches foretell in
this process only. Kept as the record of NOTES.md section 4; none is in foretell."""
def apply(name):
    if not name:
        return
    for part in name.split("+"):
        globals()["v_" + part]()

from foretell.core import prediction as _pred, policy as _policy


class _Ctx:
    def __init__(self, inner, owner, mode):
        self.inner, self.owner, self.mode = inner, owner, mode
        self.source = inner.source
        self.token_cost = inner.token_cost
    def __getattr__(self, name):
        return getattr(self.inner, name)
    def context(self):
        c = self.inner.context()
        al = self.owner.aligner
        off = (not al.aligned) if self.mode == "aligned" else (not al.has_anchor)
        return c + "/off" if off else c
    def propose(self, k): return self.inner.propose(k)
    def available(self): return self.inner.available()
    def suggested_cap(self): return self.inner.suggested_cap()
    def observe(self, t): pass


def _wrap(mode, prior=None):
    orig = _pred.PredictionProposer.__init__
    def init(self, *a, **kw):
        orig(self, *a, **kw)
        if self.fallback is not None:
            self._parts = [p if p is not self.fallback else _Ctx(p, self, mode) for p in self._parts]
    _pred.PredictionProposer.__init__ = init
    if prior is not None:
        for n in (1, 2, 3, 4):
            base = _policy.PRIORS.get(f"ngram/{n}", 0.6)
            _policy.PRIORS[f"ngram/{n}/off"] = prior(base)


def v_offaligned(): _wrap("aligned")
def v_offlost(): _wrap("lost")
def v_offaligned_p(): _wrap("aligned", lambda b: b)
def v_offlost_p(): _wrap("lost", lambda b: b)


# ---- departure sites -------------------------------------------------------------------------------
import numpy as _np
from foretell.core import aligner as _al
from foretell.core.draft import Draft as _Draft
from foretell.models.loader import load_tokenizer as _lt, resolve_model as _rm
_TOK = None
_SPACE = None
CFG = {"hard": 0.5, "mode": "hard", "a": 1.0, "b": 1.0, "sig": "head"}


def _space_ids():
    global _TOK, _SPACE
    if _SPACE is None:
        _TOK = _lt(_rm("default").path)
        _SPACE = set()
        for t in range(len(_TOK)):
            s = _TOK.convert_ids_to_tokens(t)
            if s is not None and _TOK.convert_tokens_to_string([s]).strip() == "":
                _SPACE.add(t)
    return _SPACE


def _sigs(al):
    """sig[j] for every prediction index j: (head of the line holding P[j-1], P[j])."""
    if getattr(al, "_dsig", None) is not None:
        return al._dsig
    pred, nl, space = al._pred, al._newline_set(), _space_ids()
    head, heads, start = None, [], True
    for t in pred:
        if start:
            head = None
        if head is None and t not in space:
            head = t
        heads.append(head)
        start = t in nl
    sig = []
    for j in range(len(pred)):
        prev_head = heads[j - 1] if j else None
        if CFG["sig"] == "head":
            sig.append((prev_head, pred[j]))
        elif CFG["sig"] == "head2":
            sig.append((prev_head, pred[j - 1] if j else None, pred[j]))
        else:
            sig.append((pred[j - 1] if j else None, pred[j]))
    al._dsig = sig
    return sig


def _hazard(al, j):
    st = al._dstats.get(al._dsig[j])
    if not st:
        return 0.0
    hits, misses = st
    return (hits) / (hits + misses + CFG["b"])


def v_sites():
    orig_init = _al.PredictionAligner.__init__
    def init(self, *a, **kw):
        orig_init(self, *a, **kw)
        self._dstats = {}
        self._dsig = None
        self._dpassed = _np.zeros(len(self._pred) + 1, dtype=bool)
    _al.PredictionAligner.__init__ = init
    def _newline_set(self):
        return self._newline
    _al.PredictionAligner._newline_set = _newline_set
    orig_div = _al.PredictionAligner._diverge
    def diverge(self):
        if self._aligned and self._cursor < len(self._pred) and self._out:
            sig = _sigs(self)
            s = sig[self._cursor]
            st = self._dstats.get(s)
            if st is None:  # first time: count the earlier positions with this sig the output walked through
                misses = int(sum(1 for j in _np.nonzero(self._dpassed)[0] if j < len(sig) and sig[j] == s))
                st = [0, misses]
            st[0] += 1
            self._dstats[s] = st
        orig_div(self)
    _al.PredictionAligner._diverge = diverge
    orig_obs = _al.PredictionAligner.observe
    def observe(self, tokens):
        before = self._cursor if self._aligned else None
        orig_obs(self, tokens)
        # positions the aligned walk passed (matched) in this call: [before, cursor) when still aligned
        if before is not None:
            end = self._cursor if self._aligned else self._anchor
            if end > before:
                self._dpassed[before:end] = True
                if self._dstats:
                    sig = _sigs(self)
                    for j in range(before, end):
                        st = self._dstats.get(sig[j])
                        if st is not None:
                            st[1] += 1
    _al.PredictionAligner.observe = observe
    orig_prop = _al.PredictionAligner.propose
    def propose(self, k):
        d = orig_prop(self, k)
        if not self._dstats or not d.tokens or not self._aligned or self._rewrites.active:
            return d
        start = self._best[0]
        sig = _sigs(self)
        for i in range(1, len(d.tokens)):
            j = start + i
            if j >= len(sig):
                break
            if _hazard(self, j) >= CFG["hard"]:
                return _Draft(d.tokens[:i], d.probs, d.source)
        return d
    _al.PredictionAligner.propose = propose


def v_h3(): CFG["hard"] = 0.3
def v_h7(): CFG["hard"] = 0.7
def v_sigpair(): CFG["sig"] = "pair"
def v_sighead2(): CFG["sig"] = "head2"


def _line_head(al):
    out, nl, space = al._out, al._newline, _space_ids()
    head = None
    for t in reversed(out):
        if t in nl:
            break
        if t not in space:
            head = t
    return head, (not out) or out[-1] in nl


def _cut(al, tokens):
    """Index to truncate a draft at (len(tokens) = none)."""
    if not al._dstats:
        return len(tokens)
    nl, space = al._newline, _space_ids()
    head, start = _line_head(al)
    prev = al._out[-1] if al._out else None
    for i, t in enumerate(tokens):
        # sig of draft[i]: head of the line holding the token before it
        if CFG["sig"] == "head":
            s = (head, t)
        else:
            s = (prev, t)
        st = al._dstats.get(s)
        if i >= 1 and st is not None and st[0] / (st[0] + st[1] + CFG["b"]) >= CFG["hard"]:
            return i
        # advance: the line holding draft[i]
        if start:
            head = None
        if head is None and t not in space:
            head = t
        start = t in nl
        prev = t
    return len(tokens)


def v_sites2():
    v_sites()
    _al.PredictionAligner.propose = _al_orig_propose
    orig_decide = _policy.DraftPolicy.decide
    def decide(self, room, batch_tokens=0, batch_expected=0.0, context=0):
        d = orig_decide(self, room, batch_tokens, batch_expected, context)
        prop = self.proposer
        if d.draft.tokens and isinstance(prop, _pred.PredictionProposer) and (CFG.get("all") or d.draft.source == "prediction" or prop.aligner.aligned):
            n = _cut(prop.aligner, d.draft.tokens)
            if n < len(d.draft.tokens):
                d.draft = _Draft(d.draft.tokens[:n], d.draft.probs, d.draft.source)
                d.cost = self.cost.at(context).ratio(batch_tokens + n + 1)
                d.branch = None
                d.branch_option = None
        return d
    _policy.DraftPolicy.decide = decide


_al_orig_propose = _al.PredictionAligner.propose
def v_all(): CFG["all"] = True


# ---- line-level hazard: cut a draft after the first line whose kind (head token) the output edited before ----
def _plines(al):
    if getattr(al, "_pl", None) is not None:
        return al._pl
    pred, nl, space = al._pred, al._newline, _space_ids()
    line_of, heads, ends = [], [], []
    cur, head = 0, None
    for j, t in enumerate(pred):
        line_of.append(cur)
        if head is None and t not in space:
            head = t
        if t in nl:
            heads.append(head); ends.append(j); cur += 1; head = None
    heads.append(head); ends.append(len(pred) - 1)
    al._pl = (line_of, heads, ends)
    return al._pl


def v_lines():
    orig_init = _al.PredictionAligner.__init__
    def init(self, *a, **kw):
        orig_init(self, *a, **kw)
        self._lstats = {}  # head -> [hits, misses]
        self._lhit = set()
        self._lwalked = set()  # lines whose end the aligned walk passed
        self._pl = None
    _al.PredictionAligner.__init__ = init
    orig_div = _al.PredictionAligner._diverge
    def diverge(self):
        if self._aligned and self._out and 0 < self._cursor < len(self._pred):
            line_of, heads, ends = _plines(self)
            m = self._cursor
            L = _dep_line(self, m)
            if L >= 0 and L not in self._lhit:
                self._lhit.add(L)
                h = heads[L]
                st = self._lstats.get(h)
                if st is None:
                    st = [0, sum(1 for l in self._lwalked if heads[l] == h and l not in self._lhit)]
                    self._lstats[h] = st
                st[0] += 1
        orig_div(self)
    _al.PredictionAligner._diverge = diverge
    orig_obs = _al.PredictionAligner.observe
    def observe(self, tokens):
        before = self._cursor if self._aligned else None
        orig_obs(self, tokens)
        if before is not None:
            end = self._cursor if self._aligned else self._anchor
            if end > before:
                line_of, heads, ends = _plines(self)
                # lines whose last token lies in [before, end) and were not departed in
                for L in range(line_of[before], line_of[end - 1] + 1):
                    if before <= ends[L] < end and L not in self._lhit and L not in self._lwalked:
                        # a line the walk went through from its start? count it if the walk covered its end
                        self._lwalked.add(L)
                        st = self._lstats.get(heads[L])
                        if st is not None:
                            st[1] += 1
    _al.PredictionAligner.observe = observe
    orig_decide = _policy.DraftPolicy.decide
    def decide(self, room, batch_tokens=0, batch_expected=0.0, context=0):
        d = orig_decide(self, room, batch_tokens, batch_expected, context)
        prop = self.proposer
        if d.draft.tokens and isinstance(prop, _pred.PredictionProposer):
            n = _lcut(prop.aligner, d.draft.tokens)
            if n < len(d.draft.tokens):
                d.draft = _Draft(d.draft.tokens[:n], d.draft.probs, d.draft.source)
                d.cost = self.cost.at(context).ratio(batch_tokens + n + 1)
                d.branch = None
                d.branch_option = None
        return d
    _policy.DraftPolicy.decide = decide


def _lcut(al, tokens):
    st_all = al._lstats
    if not st_all:
        return len(tokens)
    nl, space = al._newline, _space_ids()
    head, start = _line_head(al)
    if start:
        head = None
    for i, t in enumerate(tokens):
        if head is None and t not in space:
            head = t
        if t in nl:
            st = st_all.get(head)
            if st is not None and st[0] / (st[0] + st[1] + CFG["b"]) >= CFG["hard"] and i + 1 >= CFG.get("minlen", 1):
                return i + 1
            head = None
    return len(tokens)


def v_b0(): CFG["b"] = 0.0
def v_b2(): CFG["b"] = 2.0
def v_h2(): CFG["hard"] = 0.2
def v_h4(): CFG["hard"] = 0.4


# ---- soft: the line hazard in the expected tokens of a draft ---------------------------------------
def _survival(al, tokens):
    """S[i], i = 0..len: probability that hazards let draft tokens 0..i-1 stand."""
    S = _np.ones(len(tokens) + 1)
    st_all = al._lstats
    if not st_all:
        return S
    nl, space = al._newline, _space_ids()
    head, start = _line_head(al)
    if start:
        head = None
    s = 1.0
    for i, t in enumerate(tokens):
        if head is None and t not in space:
            head = t
        S[i] = s  # tokens 0..i-1 stand
        if t in nl:
            st = st_all.get(head)
            if st is not None:
                s *= 1.0 - st[0] / (st[0] + st[1] + CFG["b"])
            head = None
    S[len(tokens)] = s
    return S


def v_soft():
    v_lines()
    _policy.DraftPolicy.decide = _orig_decide  # no hard cut
    from foretell.core import adaptive_k as _ak
    orig_option = _policy.DraftPolicy._option
    def option(self, part, available, room, batch_tokens, batch_expected, rate, cost):
        prop = self.proposer
        if not (isinstance(prop, _pred.PredictionProposer) and prop.aligner._lstats and self.adaptive):
            return orig_option(self, part, available, room, batch_tokens, batch_expected, rate, cost)
        if CFG.get("predonly") and part.source != "prediction":
            return orig_option(self, part, available, room, batch_tokens, batch_expected, rate, cost)
        context = part.context()
        tracker = self.tracker(context)
        limit = min(self._limit(part, available), room)
        if limit <= 0:
            return orig_option(self, part, available, room, batch_tokens, batch_expected, rate, cost)
        would = part.propose(limit).tokens
        limit = len(would)
        if limit <= 0:
            return orig_option(self, part, available, room, batch_tokens, batch_expected, rate, cost)
        base = tracker.expected_tokens(limit)
        inc = _np.diff(_np.concatenate([[0.0], base]))
        S = _survival(prop.aligner, would)
        E = _np.cumsum(inc * S[:limit + 1])
        net = _ak.net_gain(E, cost, rate, batch_tokens)
        k = int(_np.argmax(net))
        if k == 0 and batch_tokens == 0:
            k = tracker.probe_size(cost, limit)
        return _policy.Option(part, context, k, float(net[k]), tracker.alpha, self._limit(part, available))
    _policy.DraftPolicy._option = option


_orig_decide = _policy.DraftPolicy.decide
def v_predonly(): CFG["predonly"] = True


# ---- refinements: word heads only; a substitution's line is not a hazard (a rewrite drafts it) ----------
def _wordy(h):
    _space_ids()
    if h is None:
        return False
    s = _TOK.decode([h])
    return any(c.isalpha() for c in s)


def v_wordheads():
    orig = _plines
    def plines(al):
        if getattr(al, "_pl", None) is not None:
            return al._pl
        line_of, heads, ends = orig(al)
        heads = [h if _wordy(h) else None for h in heads]
        al._pl = (line_of, heads, ends)
        return al._pl
    globals()["_plines"] = plines
    orig_lh = _line_head
    def line_head(al):
        h, s = orig_lh(al)
        return (h if _wordy(h) else None), s
    globals()["_line_head"] = line_head
    # the draft-side head: skip non-word heads (None never has stats)
    orig_surv = _survival
    def survival(al, tokens):
        st = al._lstats
        al._lstats = {h: v for h, v in st.items() if h is not None}
        try:
            return orig_surv(al, tokens)
        finally:
            al._lstats = st
    globals()["_survival"] = survival


def v_nosub():
    orig = _al.PredictionAligner._learn_edit
    def learn(self, cursor, evidence):
        skipped, inserted = cursor - evidence - self._anchor, self._since - evidence
        orig(self, cursor, evidence)
        if skipped >= 1 and inserted >= 1 and skipped <= self.config.rewrite_span and inserted <= self.config.rewrite_span:
            line_of, heads, ends = _plines(self)
            m = self._anchor
            if 0 < m < len(self._pred):
                L = _dep_line(self, m)
                if L in self._lhit:
                    self._lhit.discard(L)
                    st = self._lstats.get(heads[L])
                    if st is not None and st[0] > 0:
                        st[0] -= 1
    _al.PredictionAligner._learn_edit = learn


def _dep_line(al, m):
    """The line a departure at P[m] belongs to: the line before when only indentation precedes m on its line."""
    line_of, heads, ends = _plines(al)
    L = line_of[m]
    if CFG.get("indent", True):
        space = _space_ids()
        j = m - 1
        while j >= 0 and line_of[j] == L and al._pred[j] in space:
            j -= 1
        if j < 0 or line_of[j] != L:
            return L - 1
        return L
    return line_of[m] - 1 if m and line_of[m - 1] != line_of[m] else line_of[m]


def v_noindent(): CFG["indent"] = False


def _survival2(al, tokens):
    """As _survival, but a line's hazard applies at the first non-space token after its end (a departure
    after a line, e.g. an inserted docstring, keeps the next line's indentation)."""
    S = _np.ones(len(tokens) + 1)
    st_all = {h: v for h, v in al._lstats.items() if h is not None}
    if not st_all:
        return S
    nl, space = al._newline, _space_ids()
    head, start = _line_head(al)
    if start:
        head = None
    s, pending = 1.0, 1.0
    for i, t in enumerate(tokens):
        if t not in space and pending < 1.0:
            s *= pending
            pending = 1.0
        if head is None and t not in space:
            head = t if _wordy(t) else -1
        S[i] = s
        if t in nl:
            st = st_all.get(head)
            if st is not None:
                pending *= 1.0 - st[0] / (st[0] + st[1] + CFG["b"])
            head = None
    S[len(tokens)] = s
    return S


def v_after():
    globals()["_survival"] = _survival2
def v_b3(): CFG["b"] = 3.0
def v_b4(): CFG["b"] = 4.0
