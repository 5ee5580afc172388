"""time the AVX2 int8 kernel per number of rows M: the head (Q8_0) and a Q5_0 layer (gate_proj, down_proj)"""
import time, statistics, sys, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
r = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))[0].runner
m = r.model
head = m.lm_head
layer = m.model.layers[3].mlp
g = head.gemm
targets = {"head": head.int8, "gate": layer.gate_proj.int8, "down": layer.down_proj.int8}
for name, blocks in targets.items():
    print(name, blocks.shape, blocks.fmt, blocks.data.numel() / 1e6, "MB")
Ms = [int(a) for a in sys.argv[1].split(",")] if len(sys.argv) > 1 else [1, 2, 3, 4, 6, 8, 12, 16, 32, 64]
res = {}
for rnd in range(5):
    for name, blocks in targets.items():
        n, k = blocks.shape
        reps = 1 if name == "head" else 24
        for M in Ms:
            x = torch.randn(M, k)
            t = time.perf_counter()
            for _ in range(reps): g.linear_int8(x, blocks)
            dt = (time.perf_counter() - t) / reps
            if rnd: res.setdefault((name, M), []).append(dt * 1000)
for name in targets:
    base = statistics.median(res[name, 1])
    print(name, " ".join(f"M={M}:{statistics.median(res[name, M]):.2f}ms({statistics.median(res[name, M]) / base:.2f})" for M in Ms))
