"""foretell on vLLM, K=32 (port A) against K=64 (port B): realedit tasks with their predictions, alternating.
python k_probe.py PORT_A,PORT_B ROUNDS task,task
Environment (2026-11-30, thirteenth session): LABELS (the two servers' names, default "K=32,K=64")."""
import os, sys, time, statistics
from pathlib import Path
from openai import OpenAI
from foretell.bench import workloads as W
ports, rounds, kinds = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3].split(",")
labels = os.environ.get("LABELS", "K=32,K=64").split(",")
vs = "/".join(x.replace("=", "") for x in labels)
clients = [OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x", timeout=3000) for p in ports]
models = [c.models.list().data[0].id for c in clients]
table = {k: (f, i) for f, k, i in W.REALEDIT_TASKS}
allr = []
for kind in kinds:
    f, instr = table[kind]
    code = (W.DATA_DIR / "realedit" / f).read_text()
    msgs = [{"role": "user", "content": W.file_prompt(instr, code, W.REPLY_RULE, W.FENCE_LANGUAGE[Path(f).suffix])}]
    for c, m in zip(clients, models):
        c.chat.completions.create(model=m, messages=msgs, temperature=0, max_tokens=1)  # warm the prefix cache
    res = [[], []]
    for r in range(rounds):
        for i in ([0, 1] if r % 2 == 0 else [1, 0]):
            t = time.perf_counter()
            resp = clients[i].chat.completions.create(model=models[i], messages=msgs, max_tokens=384, temperature=0,
                                                      prediction={"type": "content", "content": code})
            res[i].append((time.perf_counter() - t, resp.choices[0].message.content, resp.usage.completion_tokens))
    same = len({x[1] for x in res[0] + res[1]}) == 1
    ratio = statistics.median(a[0] / b[0] for a, b in zip(res[0], res[1]))
    allr.append(ratio)
    print(kind, labels[0], [round(x[0], 1) for x in res[0]], labels[1], [round(x[0], 1) for x in res[1]], "tokens", res[0][0][2],
          vs, "%.3f" % ratio, "same", same, flush=True)
import math
print("geomean", vs, "%.3f" % math.exp(sum(map(math.log, allr)) / len(allr)))
