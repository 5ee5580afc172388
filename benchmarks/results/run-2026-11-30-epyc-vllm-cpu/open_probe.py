"""The open prompt (no file) through the official client: plain / n-gram (no prediction) / garbage prediction, rotating.
python open_probe.py PORT ROUNDS [max_tokens]"""
import sys, time, statistics
from openai import OpenAI
from foretell.bench import workloads as W
port, rounds = sys.argv[1], int(sys.argv[2]); maxt = int(sys.argv[3]) if len(sys.argv) > 3 else 256
c = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=1200)
model = c.models.list().data[0].id
msgs = [{"role": "user", "content": W.OPEN_PROMPT}]
garbage = (W.GARBAGE_TEXT * 20)[:1200]
c.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=1)
arms = {"plain": dict(extra_body={"speculation": {"method": "none"}}), "ngram": {},
        "garbage": dict(prediction={"type": "content", "content": garbage})}
res = {a: [] for a in arms}
names = list(arms)
for r in range(rounds):
    order = names[r % 3:] + names[:r % 3]
    for a in order:
        t = time.perf_counter(); resp = c.chat.completions.create(model=model, messages=msgs, max_tokens=maxt, temperature=0, **arms[a]); dt = time.perf_counter() - t
        res[a].append((dt, (resp.model_extra.get("foretell") or {}).get("forward_passes"), resp.choices[0].message.content, resp.usage.completion_tokens))
texts = {x[2] for v in res.values() for x in v}
for a in names:
    print(a, "median %.2f" % statistics.median(x[0] for x in res[a]), [round(x[0], 2) for x in res[a]], "passes", [x[1] for x in res[a]], "tok", res[a][0][3])
print("ngram/plain %.2f garbage/plain %.2f garbage/ngram %.2f same %s" % (
    statistics.median(x[0] for x in res["plain"]) / statistics.median(x[0] for x in res["ngram"]),
    statistics.median(x[0] for x in res["plain"]) / statistics.median(x[0] for x in res["garbage"]),
    statistics.median(x[0] for x in res["ngram"]) / statistics.median(x[0] for x in res["garbage"]), len(texts) == 1))
