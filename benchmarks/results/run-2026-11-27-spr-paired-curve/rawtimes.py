"""Raw paired timings: per round, for each size n a one-token pass then an n-token pass (context 256)."""
import sys, json, time, torch
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine import cost
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
eng, name = LLMEngine.from_config(EngineConfig(model=sys.argv[1], prefix_cache=False))
r = eng.runner
sizes = [1, 2, 3, 4, 8, 16, 32, 64, 128, 256]
kv = SeqKV(r.kv_shape, capacity=256 + 256, max_capacity=256 + 256)
gen = torch.Generator().manual_seed(0)
r.forward([Segment(kv, torch.randint(0, r.vocab_size, (256,), generator=gen).tolist(), num_logits=1)], reuse_logits=True)
kv.length = 256
for n in sizes:
    for _ in range(2): cost._timed_pass(r, kv, n, r.vocab_size, gen)
rounds = []
t0 = time.perf_counter()
for i in range(int(sys.argv[2])):
    row = {}
    for n in sizes:
        one = cost._timed_pass(r, kv, 1, r.vocab_size, gen)[0]
        big = cost._timed_pass(r, kv, n, r.vocab_size, gen)[0]
        row[n] = (one, big, time.perf_counter() - t0)
    rounds.append(row)
    print(i, " ".join(f"{n}:{row[n][1]/row[n][0]:.2f}" for n in sizes), flush=True)
json.dump(rounds, open(sys.argv[3], "w"))
