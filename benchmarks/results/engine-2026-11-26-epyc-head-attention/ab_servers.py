"""Same requests to two servers (A = old code, B = new), interleaved ABBA, with and without prediction.

    python ab_servers.py [TASK,TASK,...]   (default: every held-out task)
"""
import json, sys, time, statistics, importlib.util, openai
from pathlib import Path
spec = importlib.util.spec_from_file_location("h", Path(__file__).with_name("heldout_tasks.py")); h = importlib.util.module_from_spec(spec); spec.loader.exec_module(h)
A, B = (openai.OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x", timeout=900) for p in (8013, 8014))
M = A.models.list().data[0].id
def once(c, msgs, pred, mt):
    kw = dict(model=M, messages=msgs, temperature=0, max_tokens=mt)
    if pred is not None: kw["prediction"] = {"type": "content", "content": pred}
    t = time.perf_counter(); r = c.chat.completions.create(**kw); return time.perf_counter() - t, r.choices[0].message.content
tot = {}
ONLY = sys.argv[1].split(",") if len(sys.argv) > 1 else None
for name, path, lang, instr, style in h.T:
    if ONLY and name not in ONLY: continue
    code = open(path).read(); msgs = h.messages(style, lang, code, instr)
    for c in (A, B): once(c, msgs, None, 1)
    row = {"name": name}
    for v, pred in (("np", None), ("p", code)):
        ta, tb, texts = [], [], set()
        for c in (A, B, B, A):
            dt, txt = once(c, msgs, pred, 1600); texts.add(txt)
            (ta if c is A else tb).append(dt)
        row[v] = round(sum(ta) / sum(tb), 3); row[v + "_B_s"] = round(sum(tb) / 2, 2); row[v + "_same"] = len(texts) == 1
        tot.setdefault(v, []).append(sum(ta) / sum(tb))
    print(json.dumps(row), flush=True)
for v, xs in tot.items(): print(v, "old/new time geomean", round(statistics.geometric_mean(xs), 3), "min", round(min(xs), 3))
