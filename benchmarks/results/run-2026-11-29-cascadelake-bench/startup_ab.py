"""Start-up time of the engine (LLMEngine.from_config, the server's set-up before it listens; the cost curve from
its cache), two source trees alternating, one process each: python startup_ab.py OLD_SRC NEW_SRC ROUNDS [MODEL]."""
import subprocess, sys, time, os, statistics
old, new, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = sys.argv[4] if len(sys.argv) > 4 else "default"
code = ("import time, ctypes, gc, os; t0 = time.time()\n"
        "from foretell.config import EngineConfig\nfrom foretell.engine.llm_engine import LLMEngine\n"
        f"e, _ = LLMEngine.from_config(EngineConfig(model={model!r}))\n"
        "t1 = time.time(); gc.collect(); ctypes.CDLL('libc.so.6').malloc_trim(0)\n"
        "rss = int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2**20\n"
        "print(f'{t1 - t0:.2f} {rss:.0f}')\n")
res = {"old": [], "new": []}
for r in range(rounds):
    for arm in (("old", "new") if r % 2 == 0 else ("new", "old")):
        src = old if arm == "old" else new
        t = time.time()
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": src},
                             capture_output=True, text=True)
        wall = time.time() - t
        engine_s, rss = out.stdout.split()[-2:]
        res[arm].append((wall, float(engine_s), float(rss)))
        print(f"round {r} {arm}: process {wall:.1f} s, from_config {engine_s} s, RSS {rss} MB", flush=True)
for arm, xs in res.items():
    print(arm, "median process", f"{statistics.median(x[0] for x in xs):.1f} s", "from_config",
          f"{statistics.median(x[1] for x in xs):.1f} s", "RSS", f"{statistics.median(x[2] for x in xs):.0f} MB")
