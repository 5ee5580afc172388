import time, torch
from torch.utils.mkldnn import MkldnnLinear
torch.set_num_threads(2)
for n, k in ((4864, 896), (896, 4864), (896, 896)):
    lin = torch.nn.Linear(k, n)
    packed = MkldnnLinear(lin, torch.float32)
    for m in (64, 256, 511):
        x = torch.randn(m, k)
        f = [lambda: lin(x.clone()), lambda: packed(x)]
        for g in f: g()
        t = [[], []]
        for _ in range(7):
            for i, g in enumerate(f):
                s = time.perf_counter(); g(); g(); t[i].append((time.perf_counter() - s) / 2 * 1e3)
        a, b = sorted(t[0])[3], sorted(t[1])[3]
        print(f"{n}x{k} rows {m:3d}: MKL {a:6.2f} ms  oneDNN packed {b:6.2f} ms  ratio {b/a:.2f}  GFLOP/s MKL {2*m*n*k/a/1e6:.0f}", flush=True)
