"""A/B two servers on held-out-like tasks, pred arm (and none), requests alternating between the servers."""
import sys, time, statistics, importlib.util, os
from openai import OpenAI
ports = sys.argv[1].split(","); rounds = int(sys.argv[2]); names = sys.argv[3].split(","); arms = sys.argv[4].split(",") if len(sys.argv) > 4 else ["pred"]
H = "/work/main/benchmarks/results/"
def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(os.path.dirname(path)) + "_t", path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
mods = [load(H + "run-2026-11-28-spr-heldout/tasks.py"), load(H + "run-2026-12-01-zen4-heldout2/tasks.py")]
cl = {p: OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x", timeout=1800) for p in ports}
tot = {(p, a): [] for p in ports for a in arms}
for mod in mods:
    for name, (instr, f, style) in mod.tasks.items():
        if name not in names: continue
        msgs = [{"role": "user", "content": mod.prompt(instr, f, style)}]
        pred = mod.prediction_text(f, style)
        for p in ports: cl[p].chat.completions.create(model="default", messages=msgs, temperature=0, max_tokens=1)
        times = {(p, a): [] for p in ports for a in arms}
        for r in range(rounds):
            order = [(p, a) for a in arms for p in (ports if r % 2 == 0 else ports[::-1])]
            for p, a in order:
                kw = {"prediction": {"type": "content", "content": pred}} if a == "pred" else {}
                t0 = time.time(); cl[p].chat.completions.create(model="default", messages=msgs, temperature=0, max_tokens=2048, **kw)
                times[(p, a)].append(time.time() - t0)
        line = " ".join(f"{p}/{a} {statistics.median(v):.2f}" for (p, a), v in times.items())
        print(f"{name:14s} {line}", flush=True)
        for k, v in times.items(): tot[k].append(statistics.median(v))
import math
for a in arms:
    r = [x / y for x, y in zip(tot[(ports[1], a)], tot[(ports[0], a)])]
    print(a, f"{ports[1]}/{ports[0]} time geomean {math.exp(sum(map(math.log, r)) / len(r)):.3f}", [round(x, 3) for x in r])
