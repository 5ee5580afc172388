"""The 0.5B's output head (151936 x 896): its bf16 weights' fp32 route against int8 products on the tied
embedding's Q5_0 blocks, ms per call (fastest of 5), 1 / 4 / 16 / 64 rows."""
import time, sys, torch, statistics
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
eng, name = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))
head = eng.runner.model.lm_head; g = head.gemm
for M in (1, 4, 16, 64):
    x = torch.randn(M, 896)
    a, b = [], []
    for r in range(5):
        t = time.perf_counter(); g.linear_int8(x, head.int8); b.append(time.perf_counter() - t)
        t = time.perf_counter(); g.logits(x, head.kernel_weight); a.append(time.perf_counter() - t)
    print(f"head M={M}: bf16 route {1e3*min(a):.1f} ms  int8 {1e3*min(b):.1f} ms", flush=True)
