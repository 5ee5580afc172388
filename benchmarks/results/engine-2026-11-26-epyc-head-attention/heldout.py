"""Held-out-style edits through the openai client: the same server with and without the prediction (its n-gram
lookup on), ABBA after a warm-up request (prefix cache warm for both). Files from this machine's disk
(heldout_tasks.py); usage: python heldout.py PORT [task,task...]."""
import json, sys, time, statistics, openai
from heldout_tasks import T, messages
PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8011
ONLY = sys.argv[2].split(",") if len(sys.argv) > 2 else None
c = openai.OpenAI(base_url=f"http://127.0.0.1:{PORT}/v1", api_key="x", timeout=900)
M = c.models.list().data[0].id
def once(msgs, pred, max_tokens):
    kw = dict(model=M, messages=msgs, temperature=0, max_tokens=max_tokens)
    if pred is not None:
        kw["prediction"] = {"type": "content", "content": pred}
    t = time.perf_counter(); r = c.chat.completions.create(**kw); dt = time.perf_counter() - t
    st = (r.model_extra or {}).get("foretell") or {}
    return dt, r.choices[0].message.content, r.usage.completion_tokens, st.get("forward_passes")
rows = []
for name, path, lang, instr, style in T:
    if ONLY and name not in ONLY: continue
    code = open(path).read()
    msgs = messages(style, lang, code, instr)
    mt = 1600
    res = {"np": [], "p": []}
    once(msgs, None, 1)  # warm the prefix cache so both variants start alike
    for v in ("np", "p", "p", "np"):
        res[v].append(once(msgs, code if v == "p" else None, mt))
    tn = sum(x[0] for x in res["np"]); tp = sum(x[0] for x in res["p"])
    same = len({x[1] for x in res["np"] + res["p"]}) == 1
    row = dict(name=name, tokens=res["p"][0][2], t_np=tn / 2, t_p=tp / 2, ratio=tn / tp,
               passes_np=res["np"][0][3], passes_p=res["p"][0][3], identical=same,
               spread=[round(res["np"][i][0] / res["p"][j][0], 3) for i, j in ((0, 0), (1, 1))])
    rows.append(row); print(json.dumps(row), flush=True)
    with open(f"/tmp/heldout-{name}.txt", "w") as fh: fh.write(res["p"][0][1])
g = statistics.geometric_mean([r["ratio"] for r in rows])
print(f"geomean with/without prediction: {g:.3f}; min {min(r['ratio'] for r in rows):.3f}")
