"""Prefill of a 1000-token prompt (no prediction, 1 token out), one call per panels layer for a chunk pass (new)
against the chunks' and the other rows' calls and the copy into place (old), alternating; plus the first pass of a
request with a prediction (the last chunk + the first draft)."""
import time, sys, random, statistics, torch
from foretell.config import EngineConfig, SpeculationParams, SamplingParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.engine import runner as R
eng, _ = LLMEngine.from_config(EngineConfig())
new_forward = R.ExactKernelLinear.forward
def old_forward(self, x):
    flat = x.reshape(-1, x.shape[-1]); rows = self.rows
    if rows.library and self.dense is not None:
        return self.dense(x)
    if self.dense is None and rows.total and not rows.library:
        return self.head_logits(x)
    if self.dense is None or not rows.chunks or rows.total != flat.shape[0]:
        return self.kernel(x)
    out = flat.new_empty(flat.shape[0], self.out_features)
    for first, count in rows.chunks:
        out[first : first + count] = self._chunk(flat[first : first + count])
    if rows.others is not None:
        out[rows.others] = self.kernel(flat[rows.others], shared=False)
    return out.reshape(*x.shape[:-1], self.out_features)
rng = random.Random(0)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
def run(spec, max_tokens=1):
    ids = [rng.randrange(1000, 20000) for _ in range(n)]
    req = GenerationRequest(prompt_ids=ids, max_tokens=max_tokens, sampling=SamplingParams(temperature=0), speculation=spec)
    t = time.perf_counter(); out = eng.generate([req]); return time.perf_counter() - t
res = {"old": [], "new": []}
for r in range(6):
    for arm in (("old", "new") if r % 2 == 0 else ("new", "old")):
        R.ExactKernelLinear.forward = old_forward if arm == "old" else new_forward
        res[arm].append(run(SpeculationParams(method="none")))
ratios = [b / a for a, b in zip(res["old"], res["new"])]
print(f"prefill {n} tokens: old {[round(x, 2) for x in res['old']]} new {[round(x, 2) for x in res['new']]} new/old median {statistics.median(ratios):.3f}", flush=True)
