import json, sys
exec(open("benchmarks/results/run-2026-11-27-spr-proposer-index/long_file_replay.py").read().split("for method in")[0])
true = CostModel({2: 1.0, 4: 1.02, 8: 1.08, 16: 1.21, 32: 1.54, 64: 2.70, 128: 3.96, 256: 8.23})   # 6,000 cached tokens
short = CostModel({2: 1.03, 3: 1.03, 4: 1.04, 8: 1.04, 16: 1.10, 32: 1.35, 64: 1.75, 128: 2.59, 256: 5.54})  # 256 cached
short2 = CostModel({2: 1.04, 4: 1.05, 8: 1.05, 16: 1.12, 32: 1.36, 64: 2.18, 128: 3.70, 256: 7.07})
for method in ("auto", "ngram"):
    for name, curve in (("short", short), ("short2", short2), ("true", true)):
        spec = SpeculationParams(prediction=tuple(pred) if method != "ngram" else None, method=method)
        p = DraftPolicy(prediction.make_proposer(prompt, spec, classes), curve, stop_ids={eos}, trees=False)
        pos = steps = 0; cost = 0.0
        while pos < len(out):
            dd = p.decide(min(128, len(out) - pos - 1))
            w = dd.draft.tokens; m = 0
            while m < len(w) and out[pos + m] == w[m]: m += 1
            emitted = out[pos:pos + m + 1]
            p.record(dd, emitted); p.proposer.observe(emitted)
            cost += true.ratio(len(w) + 1); pos += len(emitted); steps += 1
        print(f"{method:6s} decided with {name:6s}: steps {steps} true cost {cost:.1f}")
