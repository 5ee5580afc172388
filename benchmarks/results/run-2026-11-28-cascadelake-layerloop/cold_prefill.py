"""Cold prompts on two foretell servers side by side: each held-out-like task's prompt with a fresh first line (so
no prefix-cache entry serves it), max_tokens 1, through the official openai client; the servers alternate per
request, the order flipping each round. Prints per task the prompt's tokens and each server's seconds (median).

    python cold_prefill.py PORT_A PORT_B ROUNDS
"""
import os, statistics, sys, time, uuid
from openai import OpenAI
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt
pa, pb, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
clients = {k: OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x", timeout=1800) for k, p in (("A", pa), ("B", pb))}
model = clients["A"].models.list().data[0].id
ratios = []
for name, (instr, f, style) in tasks.items():
    times = {"A": [], "B": []}
    for r in range(rounds):
        for server in ("AB" if r % 2 == 0 else "BA"):
            msgs = [{"role": "user", "content": f"(request {uuid.uuid4().hex})\n" + prompt(instr, f, style)}]
            t = time.perf_counter()
            resp = clients[server].chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=1)
            times[server].append(time.perf_counter() - t)
    a, b = statistics.median(times["A"]), statistics.median(times["B"])
    ratios.append(a / b)
    print(f"{name:14} prompt {resp.usage.prompt_tokens:5} tokens | A {a:6.2f} s  B {b:6.2f} s | A/B {a / b:.2f}", flush=True)
print(f"geomean A/B {statistics.geometric_mean(ratios):.3f}")
