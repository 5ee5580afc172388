"""Whole passes of the 0.5B in fp32 exact mode, this round's int8 route (B) against the round before's (A),
alternating in one process: A = the previous build of cpu_gemm.c (its foretell_linear_q8: weights decoded through
a buffer in every pass), the 12 Q6_K down_proj layers on the bf16 weights' fp32 route, the head on its bf16
weights (with the int8 argmax copy where the rows need only their argmax); B = this round: weights decoded in
registers for passes of up to 8 rows, groups interleaved for longer ones, the Q6_K layers and the head (the tied
embedding's Q5_0 blocks) on the int8 route. n tokens after 600 cached ones, argmax-only rows (greedy) and
all logits (sampling, logprobs), 8 rounds, median paired ratio B/A.

    git show 0d7337a:src/foretell/engine/cpu_gemm.c > /tmp/old.c
    gcc -O3 -march=native -fopenmp -shared -fPIC -o /tmp/old.so /tmp/old.c
    python passes_ab.py /tmp/old.so [sizes]
"""
import ctypes, time, sys, torch, statistics
from foretell.config import EngineConfig
from foretell.engine import cpu_gemm
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.runner import ExactKernelLinear, Segment
from foretell.engine.kv_cache import SeqKV
eng, name = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))
runner = eng.runner
head = runner.model.lm_head
gemm = head.gemm
old = ctypes.CDLL(sys.argv[1]).foretell_linear_q8
old.restype, old.argtypes = ctypes.c_int, gemm._linear_q8.argtypes
new = gemm._linear_q8
q6 = [m for m in runner.model.modules() if isinstance(m, ExactKernelLinear) and m.int8 is not None and m.int8.fmt == 14]
saved = {id(m): m.int8 for m in q6}
head_blocks, argmax = head.int8, cpu_gemm.ArgmaxHead(gemm, head.kernel_weight)
print("int8 layers", runner.int8_layers, "Q6_K", len(q6), "head on int8", head_blocks is not None, flush=True)
def arm(b):
    gemm._linear_q8 = new if b else old
    for m in q6: m.int8 = saved[id(m)] if b else None
    head.int8, head.argmax = (head_blocks, None) if b else (None, argmax)
torch.manual_seed(0)
ctx = 600
tokens = torch.randint(0, 150000, (ctx + 200,)).tolist()
kv = SeqKV(runner.kv_shape, capacity=ctx + 200, max_capacity=ctx + 200)
runner.forward([Segment(kv, tokens[:ctx], num_logits=1)]); kv.length = ctx
sizes = [int(s) for s in (sys.argv[2].split(",") if len(sys.argv) > 2 else "1,2,4,8,16,32,64".split(","))]
for argmax_only in (True, False):
    res = {(n, b): [] for n in sizes for b in (0, 1)}
    for rnd in range(8):
        for n in sizes:
            for b in ((0, 1) if rnd % 2 == 0 else (1, 0)):
                arm(b)
                seg = Segment(kv, tokens[ctx:ctx + n], num_logits=n, argmax_only=argmax_only)
                t = time.perf_counter(); runner.forward([seg], reuse_logits=True); res[(n, b)].append(time.perf_counter() - t)
    for n in sizes:
        a, b = res[(n, 0)], res[(n, 1)]
        ratio = statistics.median(sorted(y / x for x, y in zip(a, b)))
        print(f"{'argmax' if argmax_only else 'logits'} {n:3d} tokens: A med {1e3*statistics.median(a):7.1f} ms | B med {1e3*statistics.median(b):7.1f} ms | B/A paired median {ratio:.3f}", flush=True)
