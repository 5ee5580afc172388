# run from the repository root: .venv/bin/python benchmarks/results/gpu-2026-11-27-h200-vllm-bench/engine_step_overhead.py [-p]
"""Engine step overhead with a tiny model (the forward is negligible): 8 concurrent requests following their
predictions (each prediction = the request's own plain output), ms per engine step and where it goes."""
import cProfile, pstats, sys, time
import torch
sys.path.insert(0, "tests")
from test_engine import make_engine, request, prompts
from foretell.testing import make_tiny_model, make_tiny_tokenizer
torch.manual_seed(0)
model, tok = make_tiny_model(seed=1), make_tiny_tokenizer()
ps = prompts(tok, 8)
plain = make_engine(model, tok)
outs = plain.generate([request(p, 200, request_id=str(i)) for i, p in enumerate(ps)])
ids = lambda outs: [[t for o in outs[str(i)] for t in o.new_token_ids] for i in range(8)]
preds = ids(outs)
def run():
    eng = make_engine(model, tok)
    steps = [0]
    orig = eng.step
    def counted():
        steps[0] += 1
        return orig()
    eng.step = counted
    t0 = time.perf_counter()
    res = eng.generate([request(p, 200, prediction=preds[i], request_id=str(i)) for i, p in enumerate(ps)])
    dt = time.perf_counter() - t0
    assert ids(res) == preds
    return dt, steps[0]
run()
best = min(run() for _ in range(3))
print(f"8 requests x {len(preds[0])} tokens: {best[0]*1e3:.0f} ms, {best[1]} steps, {best[0]/best[1]*1e3:.2f} ms per step")
if "-p" in sys.argv:
    pr = cProfile.Profile(); pr.enable(); run(); pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)
