"""A 0.5B-shaped pass of 24 layers' linears (cold weights: 24 layers > L3), int8 blocks vs bf16 copies, alternating."""
import sys, time, torch
sys.path.insert(0, "tests")  # run from the repository root
from test_int8_linears import blocks_of
from foretell.engine import cpu_gemm
torch.set_num_threads(2)
g = cpu_gemm.load()
shapes = [("Q5_0", 896, 896), ("Q5_0", 128, 896), ("Q8_0", 128, 896), ("Q5_0", 896, 896), ("Q5_0", 4864, 896),
          ("Q5_0", 4864, 896), (None, 896, 4864)]
layers = []
for l in range(24):
    for i, (fmt, n, k) in enumerate(shapes):
        fmt = fmt or ("Q6_K" if l % 2 else "Q4_K")
        wb, dec = blocks_of(fmt, n, k, seed=100 * l + i)
        layers.append((wb, torch.from_numpy(dec).bfloat16()))
rows_list = [int(r) for r in (sys.argv[1] if len(sys.argv) > 1 else "1,2,4,8,16,32,64").split(",")]
for m in rows_list:
    xs = {896: torch.randn(m, 896), 4864: torch.randn(m, 4864)}
    def int8():
        for wb, _ in layers: g.linear_int8(xs[wb.shape[1]], wb)
    def bf16():
        for wb, w in layers: g.linear(xs[wb.shape[1]], w)
    t = {"int8": [], "bf16": []}
    for _ in range(7):
        for a, f in (("int8", int8), ("bf16", bf16)):
            s = time.perf_counter(); f(); t[a].append((time.perf_counter() - s) * 1e3)
    med = {a: sorted(v)[3] for a, v in t.items()}
    print(f"rows {m:3d}  int8 {med['int8']:7.2f} ms  bf16 {med['bf16']:7.2f} ms  ratio {med['int8']/med['bf16']:.2f}", flush=True)
