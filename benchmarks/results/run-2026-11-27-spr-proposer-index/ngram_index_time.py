"""Time to build NgramProposer over a 1,500-token context (fastest of 20): run with PYTHONPATH pointing at
the old and the new source tree in turn."""
import random
import time

from foretell.core.ngram import NgramProposer

random.seed(0)
seq = [random.randrange(2000) for _ in range(1500)]
times = []
for _ in range(20):
    t = time.perf_counter()
    NgramProposer(seq)
    times.append(time.perf_counter() - t)
print(f"NgramProposer over 1,500 tokens: {min(times) * 1e3:.2f} ms")
