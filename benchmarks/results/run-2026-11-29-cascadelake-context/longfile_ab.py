"""Two servers (A, B), the long-file tasks (bench longfile: a 350-line file, the whole file back) through the
official client, cold prompts, with the file as the prediction and without (n-gram lookup), alternating the
servers per request; replies must be the same. python longfile_ab.py PORT_A PORT_B ROUNDS OUT"""
import sys, time, uuid, math, json
from openai import OpenAI
from foretell.bench.workloads import LONGFILE_TASKS, LONGFILE_RULE, DATA_DIR, file_prompt
ports = {"A": int(sys.argv[1]), "B": int(sys.argv[2])}
rounds = int(sys.argv[3])
out = sys.argv[4]
clients = {k: OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x", timeout=900) for k, p in ports.items()}
model = clients["A"].models.list().data[0].id
res = {}
for r in range(rounds):
    for i, (filename, kind, instruction) in enumerate(LONGFILE_TASKS):
        code = (DATA_DIR / "longfile" / filename).read_text()
        for mode in ("prediction", "ngram"):
            nonce = uuid.uuid4().hex[:12]
            msgs = [{"role": "user", "content": f"Request {nonce}.\n" + file_prompt(instruction, code, LONGFILE_RULE, "python")}]
            extra = {"prediction": {"type": "content", "content": code}} if mode == "prediction" else {}
            order = ("A", "B") if (r + i) % 2 == 0 else ("B", "A")
            for arm in order:
                t = time.perf_counter(); first = None; text = []
                stream = clients[arm].chat.completions.create(model=model, messages=msgs, temperature=0, stream=True,
                                                              max_tokens=4096, **extra)
                for ch in stream:
                    if ch.choices and ch.choices[0].delta.content:
                        if first is None: first = time.perf_counter() - t
                        text.append(ch.choices[0].delta.content)
                res.setdefault(f"{kind}/{mode}", {}).setdefault(arm, []).append((first, time.perf_counter() - t, "".join(text)))
            a, b = res[f"{kind}/{mode}"]["A"][-1], res[f"{kind}/{mode}"]["B"][-1]
            print(f"{kind:12s} {mode:10s} ttft A {a[0]:.2f} B {b[0]:.2f}  total A {a[1]:.2f} B {b[1]:.2f}  A/B {a[1]/b[1]:.3f}  same {a[2] == b[2]}", flush=True)
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
for mode in ("prediction", "ngram"):
    tot = [a[1] / b[1] for k, v in res.items() if k.endswith(mode) for a, b in zip(v["A"], v["B"])]
    print(f"{mode}: A/B total geomean {gm(tot):.3f} (min {min(tot):.3f}, max {max(tot):.3f})")
for arm in ("A", "B"):
    ratio = [n[1] / p[1] for kind in {k.split('/')[0] for k in res}
             for p, n in zip(res[f"{kind}/prediction"][arm], res[f"{kind}/ngram"][arm])]
    print(f"{arm}: prediction vs n-gram geomean {gm(ratio):.3f} ({', '.join(f'{x:.2f}' for x in ratio)})")
json.dump(res, open(f"{out}/longfile_ab-{int(time.time())}.json", "w"))
