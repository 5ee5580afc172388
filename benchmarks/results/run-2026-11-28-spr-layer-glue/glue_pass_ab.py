"""Whole passes of the 0.5B (1,200 cached tokens) with exact mode's layer glue on and off, alternating pass by pass in one
process: median ms and the median paired ratio per size; and the logits of a 33-token pass both ways (equal to the bit?).
FORETELL_AB_DTYPE (default auto) sets the model's dtype, --avx2 builds the kernel without AVX-512 (as on a CPU without
it), FORETELL_CPU_AMX=0 turns AMX off (run-2026-11-28-spr-fp32-glue: fp32)."""
import os, statistics, sys, time, torch
from foretell.engine import cpu_gemm
if "--avx2" in sys.argv:
    cpu_gemm.FLAGS = (*cpu_gemm.FLAGS, "-mno-avx512f")
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.cost import _timed_pass
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment, GlueRMSNorm, GlueMLP
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False, dtype=os.environ.get("FORETELL_AB_DTYPE", "auto")))
runner = engine.runner
rows = runner._exact_rows
print("lean", runner.lean, "glue modules", sum(isinstance(m, (GlueRMSNorm, GlueMLP)) for m in runner.model.modules()), flush=True)
gen = torch.Generator().manual_seed(0)
kv = SeqKV(runner.kv_shape, 2200, 2200)
toks = torch.randint(0, runner.vocab_size, (1200,), generator=gen).tolist()
runner.forward([Segment(kv, toks, 1)], reuse_logits=True)
L = 1200
# same logits?
probe = torch.randint(0, runner.vocab_size, (33,), generator=gen).tolist()
outs = []
for glue in (True, False):
    rows.glue = glue; kv.length = L
    outs.append(runner.forward([Segment(kv, probe, num_logits=33)])[0].clone())
print("same logits on/off:", torch.equal(outs[0], outs[1]), flush=True)
res = {}
sizes = (1, 4, 17, 64, 128, 256)
for rnd in range(9):
    for n in sizes:
        for glue in ((True, False) if rnd % 2 else (False, True)):
            rows.glue = glue; kv.length = L
            dt = _timed_pass(runner, kv, n, runner.vocab_size, gen)[0]
            if rnd: res.setdefault((n, glue), []).append(dt)
rows.glue = True
for n in sizes:
    on, off = res[(n, True)], res[(n, False)]
    print(f"n={n}: off {statistics.median(off)*1e3:.1f} ms on {statistics.median(on)*1e3:.1f} ms  paired ratio {statistics.median(a/b for a, b in zip(on, off)):.3f}", flush=True)
