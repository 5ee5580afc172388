"""NgramProposer over a 30,000-token context (random ids of 5,000): build time, then 100 steps of observing one
token and proposing (a lookup each); with -m the memory the index holds (tracemalloc, which slows the build).
Run with PYTHONPATH pointing at the old and the new source tree in turn."""
import random
import sys
import time
import tracemalloc

from foretell.core.ngram import NgramProposer

random.seed(0)
seq = [random.randrange(5000) for _ in range(30000)]
if "-m" in sys.argv:
    tracemalloc.start()
t = time.perf_counter()
proposer = NgramProposer(seq)
build = time.perf_counter() - t
held = tracemalloc.get_traced_memory()[0] if "-m" in sys.argv else 0
t = time.perf_counter()
for _ in range(100):
    proposer.observe([random.randrange(5000)])
    proposer.propose(8)
step = (time.perf_counter() - t) / 100
print(f"30,000-token context: build {build * 1e3:.1f} ms; observe + propose {step * 1e6:.0f} us"
      + (f"; index {held / 1e6:.1f} MB" if held else ""))
