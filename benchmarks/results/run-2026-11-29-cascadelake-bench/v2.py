import sys; sys.path.insert(0, "benchmarks/results/run-2026-11-29-cascadelake-bench")
from variants import *
from items import SPR
CURVES["spr"] = SPR
base = dict(pol.PRIORS)
for prior in [(0.98, 50.0), (0.99, 100.0), (0.99, 200.0), (0.995, 200.0)]:
    pol.PRIORS.clear(); pol.PRIORS.update(base); pol.PRIORS["prediction/aligned"] = prior
    run_all(f"aligned prior {prior}")
pol.PRIORS.clear(); pol.PRIORS.update(base)
