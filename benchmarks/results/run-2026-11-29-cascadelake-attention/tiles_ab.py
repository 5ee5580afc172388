"""One-token and 16-token passes of the 0.5B after N cached tokens (fp32, panels), the same runner, a sequence with
tiled keys kept between passes (SeqKV.tiles) against one without (keys transposed again in every call), the passes
alternating; median of 9 after 2 warm-ups each."""
import time, statistics, random, sys
from dataclasses import replace
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
eng, _ = LLMEngine.from_config(EngineConfig(measure_cost_curve=False))
r = eng.runner
assert r.kv_shape.key_tile
shapes = {"tiled": r.kv_shape, "untiled": replace(r.kv_shape, key_tile=0)}
rng = random.Random(0)
for ctx in [int(x) for x in sys.argv[1].split(",")]:
    toks = [rng.randrange(1000, 20000) for _ in range(ctx)]
    kvs = {}
    for name, shape in shapes.items():
        kv = kvs[name] = SeqKV(shape, ctx + 64, ctx + 64)
        for i in range(0, ctx, 512):
            r.forward([Segment(kv, toks[i:i + 512], 1)]); kv.length = min(ctx, i + 512)
    line = []
    for k in (1, 16):
        ts = {n: [] for n in kvs}
        for rep in range(11):
            for name in (("tiled", "untiled") if rep % 2 else ("untiled", "tiled")):
                t = time.perf_counter(); r.forward([Segment(kvs[name], toks[:k], k)]); ts[name].append(time.perf_counter() - t)
        med = {n: statistics.median(v[2:]) * 1000 for n, v in ts.items()}
        line.append(f"{k}-token pass {med['untiled']:.1f} -> {med['tiled']:.1f} ms")
    print(f"ctx {ctx:5d}: " + ", ".join(line), flush=True)
