"""Two servers (A: this round, B: the round before), cold prompts (a new first line each time) of the held-out-like
tasks with the file as the prediction, streamed, 32 tokens (or MAX_TOKENS; 0: full replies): time to the first token and to the end, alternating the
servers per request; the replies must be the same on both."""
import sys, time, uuid, statistics, math, json
sys.path.insert(0, "benchmarks/results/run-2026-11-28-spr-heldout")
from tasks import tasks, prompt, prediction_text
from openai import OpenAI
ports = {"A": int(sys.argv[1]), "B": int(sys.argv[2])}
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
max_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 32  # python cold_ab.py PORT_A PORT_B ROUNDS MAX_TOKENS [OUT_DIR]
limit = {"max_tokens": max_tokens} if max_tokens else {}
clients = {k: OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x") for k, p in ports.items()}
model = clients["A"].models.list().data[0].id
res = {}
for r in range(rounds):
    for name, (instr, f, style) in tasks.items():
        nonce = uuid.uuid4().hex[:12]
        msgs = [{"role": "user", "content": f"Request {nonce}.\n" + prompt(instr, f, style)}]
        order = ("A", "B") if (r + len(res)) % 2 == 0 else ("B", "A")
        for arm in order:
            t = time.perf_counter(); first = None; text = []
            stream = clients[arm].chat.completions.create(model=model, messages=msgs, temperature=0, stream=True, **limit,
                                                          prediction={"type": "content", "content": prediction_text(f, style)})
            for ch in stream:
                if ch.choices and ch.choices[0].delta.content:
                    if first is None: first = time.perf_counter() - t
                    text.append(ch.choices[0].delta.content)
            res.setdefault(name, {}).setdefault(arm, []).append((first, time.perf_counter() - t, "".join(text)))
        a, b = res[name]["A"][-1], res[name]["B"][-1]
        print(f"{name:14s} ttft A {a[0]:.2f} B {b[0]:.2f}  total A {a[1]:.2f} B {b[1]:.2f}  same {a[2] == b[2]}", flush=True)
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
tt = [a[0] / b[0] for v in res.values() for a, b in zip(v["A"], v["B"])]
tot = [a[1] / b[1] for v in res.values() for a, b in zip(v["A"], v["B"])]
print(f"A/B time to first token: geomean {gm(tt):.3f} (min {min(tt):.3f}, max {max(tt):.3f}); total {gm(tot):.3f}; same replies {sum(a[2] == b[2] for v in res.values() for a, b in zip(v['A'], v['B']))}/{len(tt)}")
out = sys.argv[5] if len(sys.argv) > 5 else "benchmarks/results/run-2026-11-29-cascadelake-bench"  # OUT_DIR
json.dump(res, open(f"{out}/cold_ab-{int(time.time())}.json", "w"))
