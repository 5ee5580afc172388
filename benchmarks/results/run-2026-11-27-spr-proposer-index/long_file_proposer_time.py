# Replays the saved reply (/tmp/long51.json, from long_file_save.py) step by step with the draft policy, no model; see NOTES.md.
"""Per-step proposer/policy time (no model) on the long-file output: prediction vs n-gram only."""
import sys, time
# the tokenizer, the saved request's prompt, prediction and output: long_file_replay.py's set-up
exec(open("benchmarks/results/run-2026-11-27-spr-proposer-index/long_file_replay.py").read().split("curve = CostModel(")[0])
curve = CostModel({2: 1.0, 4: 1.06, 8: 1.06, 16: 1.16, 24: 1.28, 32: 1.39, 128: 4.24, 256: 8.64})
def run(method, profile=False):
    spec = SpeculationParams(prediction=tuple(pred) if method != "ngram" else None, method=method)
    p = DraftPolicy(prediction.make_proposer(prompt, spec, classes), curve, stop_ids={eos}, trees=True)
    pos = steps = 0; t_dec = t_rec = 0.0
    while pos < len(out):
        room = min(128, len(out) - pos - 1)
        t0 = time.perf_counter(); dd = p.decide(room); t1 = time.perf_counter()
        w = dd.draft.tokens; m = 0
        while m < len(w) and out[pos + m] == w[m]: m += 1
        emitted = out[pos:pos + m + 1]
        t2 = time.perf_counter(); p.record(dd, emitted); p.proposer.observe(emitted); t3 = time.perf_counter()
        t_dec += t1 - t0; t_rec += t3 - t2
        pos += len(emitted); steps += 1
    return steps, t_dec, t_rec
for method in ("auto", "ngram", "auto", "ngram"):
    s, a, b = run(method)
    print(f"{method:6s} steps {s} decide {a*1e3:.0f} ms ({a/s*1e3:.2f}/step) record+observe {b*1e3:.0f} ms ({b/s*1e3:.2f}/step)")
if "-p" in sys.argv:
    import cProfile, pstats
    pr = cProfile.Profile(); pr.enable(); run("auto"); pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(20)
