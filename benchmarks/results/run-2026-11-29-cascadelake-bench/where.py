import math, sys, collections
sys.path.insert(0, "benchmarks/results/run-2026-11-29-cascadelake-bench")
from items import load, classes, eos, PANELS, tok
import foretell.core.prediction as prediction
from foretell.core.policy import DraftPolicy, PRIORS
from foretell.config import SpeculationParams
from foretell.core.simulate import _common_prefix
curve = PANELS
items = load(curve)
seen = set()
NL = classes.newline
def lpos(seq, i):
    """tokens since the last newline before index i in seq (0 = first token of a line)"""
    j = i - 1; n = 0
    while j >= 0 and seq[j] not in NL:
        j -= 1; n += 1
    return n
rej = collections.Counter(); acc = collections.Counter()
for g, name, prompt, pred, out, _ in items:
    key = (name, len(out))
    if key in seen: continue
    seen.add(key)
    spec = SpeculationParams(prediction=pred, method="auto")
    p = DraftPolicy(prediction.make_proposer(prompt, spec, classes), curve, priors=PRIORS, stop_ids={eos})
    pos = 0
    while pos < len(out):
        room = min(128, len(out) - pos - 1)
        d = p.decide(room)
        hits = _common_prefix(d.draft.tokens, out, pos) if d.draft.tokens else 0
        ctx = d.chosen.context if d.chosen else "none"
        if ctx in ("prediction/aligned", "prediction/reanchored") and d.draft.tokens:
            seq = out[:pos] + d.draft.tokens
            for j in range(hits):
                acc[min(lpos(seq, pos + j), 6)] += 1
            if hits < len(d.draft.tokens):
                rej[min(lpos(seq, pos + hits), 6)] += 1
        emitted = out[pos:pos + hits + 1]
        p.record(d, emitted); p.proposer.observe(emitted); pos += len(emitted)
print("unique items", len(seen))
for b in range(7):
    print(b, "acc", acc[b], "rej", rej[b], f"rej rate {rej[b]/(acc[b]+rej[b]):.4f}")
