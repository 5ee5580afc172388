"""Two builds of the kernel source on CpuGemm.linear_int8: the same bits, then calls alternating between the builds
(7 rounds, medians, ms a call). Random blocks of the 0.5B's shapes (Q5_0 gate/up joined 9728 x 896, Q8_0 1152 x 896,
Q4_K and Q6_K down 896 x 4864); SHAPE=NxK takes one shape for every format (the head: SHAPE=151936x896); T threads
(default 2).

    python ab.py OLD.c NEW.c 1,2,16,64 [6,8,12,14]"""
import os
import statistics
import sys
import time
from pathlib import Path

import torch

import foretell.engine.cpu_gemm as cg

torch.set_num_threads(int(os.environ.get("T", "2")))
builds = {}
source = cg.SOURCE
for arm, path in (("old", sys.argv[1]), ("new", sys.argv[2])):
    cg.SOURCE = Path(path)
    cg.load.cache_clear()
    builds[arm] = cg.load()
    assert builds[arm] is not None
cg.SOURCE = source
rows = [int(a) for a in sys.argv[3].split(",")]
formats = [int(a) for a in sys.argv[4].split(",")] if len(sys.argv) > 4 else [6, 12, 14, 8]
shape = {6: (9728, 896), 8: (1152, 896), 12: (896, 4864), 14: (896, 4864)}
if os.environ.get("SHAPE"):
    shape = {f: tuple(int(v) for v in os.environ["SHAPE"].split("x")) for f in shape}
gen = torch.Generator().manual_seed(1)
for fmt in formats:
    n, k = shape[fmt]
    values, nbytes = cg.GGUF_BLOCKS[fmt]
    raw = torch.randint(0, 256, (n * k // values * nbytes,), dtype=torch.uint8, generator=gen)
    w = cg.GgufWeight(fmt, raw, (n, k))
    for m in rows:
        x = torch.randn(m, k, generator=gen)
        a, b = builds["old"].linear_int8(x, w), builds["new"].linear_int8(x, w)
        same = torch.equal(a.nan_to_num(1e30), b.nan_to_num(1e30))  # random scales: some inf and NaN
        reps = max(2, int(3e8 / (m * n * k)))
        times = {"old": [], "new": []}
        for rd in range(7):
            for arm in (("old", "new") if rd % 2 else ("new", "old")):
                t = time.perf_counter()
                for _ in range(reps):
                    builds[arm].linear_int8(x, w)
                times[arm].append((time.perf_counter() - t) / reps * 1e3)
        o, nw = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"fmt {fmt:2d} M={m:4d} same={same} old {o:8.3f} ms new {nw:8.3f} ms  new/old {nw / o:5.2f}", flush=True)
