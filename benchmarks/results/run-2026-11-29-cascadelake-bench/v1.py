import sys; sys.path.insert(0, "benchmarks/results/run-2026-11-29-cascadelake-bench")
from variants import *
orig = pol.DraftPolicy.tracker
def with_hazard(h, ctxs=("prediction/aligned",)):
    def tracker(self, context):
        found = self.trackers.get(context)
        if found is None:
            found = orig(self, context)
            if context in ctxs: found.hazard = h
        return found
    return tracker
for h in (0.05, 0.1, 0.2):
    pol.DraftPolicy.tracker = with_hazard(h)
    run_all(f"aligned hazard {h}")
pol.DraftPolicy.tracker = orig
origopt = pol.DraftPolicy._option
def capped(cap):
    def _option(self, part, available, room, bt, be, rate):
        if part.context() == "prediction/aligned":
            available = min(available, cap)
        return origopt(self, part, available, room, bt, be, rate)
    return _option
for cap in (32, 48, 64):
    pol.DraftPolicy._option = capped(cap)
    run_all(f"aligned cap {cap}")
pol.DraftPolicy._option = origopt
