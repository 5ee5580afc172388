"""Replayed estimate, not built: a lazy output head (head rows in chunks of CHUNK, none past the chunk of the first
rejected row), HUNIT one-token passes saved per head row skipped. Wraps ../run-2026-12-01-zen4-heldout2/replay/corpus.py."""
import os, sys, runpy, math, collections
import foretell.core.simulate as S
H = float(os.environ.get("HUNIT", "0.04")); CH = int(os.environ.get("CHUNK", "16"))
orig_common = S._common_prefix
stats = {"waste": 0}
def patched(policy, output, k_max=128, hindsight=None, context=0):
    output = list(output); pos = passes = 0; cost = 0.0; saved = 0.0; sources = {}
    while pos < len(output):
        room = min(k_max, len(output) - pos - 1)
        d = policy.decide(room, context=context + pos)
        hits = 0; n = 0
        for draft in (d.draft, d.branch):
            if draft is not None and draft.tokens:
                hits = max(hits, S._common_prefix(draft.tokens, output, pos)); n += len(draft)
        emitted = output[pos:pos + hits + 1]
        policy.record(d, emitted)
        if policy.proposer is not None: policy.proposer.observe(emitted)
        rows = n + 1; need = min(rows, math.ceil((hits + 1) / CH) * CH)
        saved += H * (rows - need)
        passes += 1; cost += d.cost; pos += len(emitted)
    return S.PolicyResult(passes, cost - saved, len(output), sources)
S.simulate_policy = patched
sys.argv = ["corpus.py"]
runpy.run_path("benchmarks/results/run-2026-12-01-zen4-heldout2/replay/corpus.py", run_name="__main__")
