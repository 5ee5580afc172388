"""the head's kernel on cache-resident slices (compute) vs the whole head (cold): per M"""
import time, statistics, sys, torch
from foretell.engine import cpu_gemm
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
r = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))[0].runner
head = r.model.lm_head; g = head.gemm; full = head.int8
n, k = full.shape
rows = int(sys.argv[1])
rb = full.data.numel() // n
part = cpu_gemm.GgufWeight(full.fmt, full.data.view(-1)[: rows * rb].clone(), (rows, k))
reps = 10
Ms = [1, 2, 3, 4, 6, 8, 16, 64]
res = {}
for rnd in range(6):
    for M in Ms:
        x = torch.randn(M, k)
        t = time.perf_counter(); g.linear_int8(x, full); cold = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(reps): g.linear_int8(x, part)
        warm = (time.perf_counter() - t) / reps * n / rows
        if rnd: res.setdefault(M, []).append((cold * 1000, warm * 1000))
for M in Ms:
    c = statistics.median(a for a, b in res[M]); w = statistics.median(b for a, b in res[M])
    print(f"M={M}: cold whole head {c:.2f} ms, warm (scaled to the head) {w:.2f} ms, warm per row {w / M:.2f}")
