"""Held-out-like edits through the official openai client: with vs without the prediction, alternating per request.

    python probe.py PORT ROUNDS [all|task,task] [0|default] [max_tokens]

A warm-up request per task fills the prefix cache first, so neither arm pays the prompt (the server's default).
Temperature 0 unless "default" (the client sends none: the server's default 1.0)."""
import sys, time, json, statistics
from openai import OpenAI
port = sys.argv[1] if len(sys.argv) > 1 else "8011"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
only = sys.argv[3].split(",") if len(sys.argv) > 3 and sys.argv[3] != "all" else None
MAXT = int(sys.argv[5]) if len(sys.argv) > 5 else 2048
TEMP = None if len(sys.argv) > 4 and sys.argv[4] == "default" else 0
c = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=1200)
model = c.models.list().data[0].id
import os; HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE)
from tasks import tasks, prompt, prediction_text
res = {}
for name, (instr, f, style) in tasks.items():
    if only and name not in only: continue
    msgs = [{"role": "user", "content": prompt(instr, f, style)}]
    c.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=1)  # warm the prefix cache
    for r in range(rounds):
        order = ["pred", "none"] if r % 2 == 0 else ["none", "pred"]
        for arm in order:
            kw = dict(model=model, messages=msgs, max_tokens=MAXT)
            if TEMP is not None: kw["temperature"] = TEMP
            if arm == "pred": kw["prediction"] = {"type": "content", "content": prediction_text(f, style)}
            t = time.perf_counter(); resp = c.chat.completions.create(**kw); dt = time.perf_counter() - t
            st = getattr(resp, "model_extra", {}).get("foretell") or {}
            u = resp.usage
            res.setdefault(name, {}).setdefault(arm, []).append(dict(t=dt, text=resp.choices[0].message.content, tok=u.completion_tokens, passes=st.get("forward_passes"), cached=(u.prompt_tokens_details.cached_tokens if u.prompt_tokens_details else None), stats=st))
    a = res[name]
    same = all(x["text"] == a["none"][0]["text"] for x in a["pred"] + a["none"])
    ratios = [n["t"] / p["t"] for p, n in zip(a["pred"], a["none"])]
    tpt = [x["t"] / x["tok"] for x in a["pred"]], [x["t"] / x["tok"] for x in a["none"]]
    print(f"  ms/token pred {[round(1000*v,1) for v in tpt[0]]} none {[round(1000*v,1) for v in tpt[1]]} tok {[x['tok'] for x in a['pred']]} {[x['tok'] for x in a['none']]} passes {[x['passes'] for x in a['pred']]} {[x['passes'] for x in a['none']]}")
    print(f"{name:14} tok {a['pred'][0]['tok']:5} pred {statistics.median(x['t'] for x in a['pred']):6.2f}s passes {a['pred'][0]['passes']} | none {statistics.median(x['t'] for x in a['none']):6.2f}s passes {a['none'][0]['passes']} | vs ngram {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) same={same} cached={[x['cached'] for x in a['pred']+a['none']]}", flush=True)
json.dump(res, open(os.path.join(HERE, f"res-{int(time.time())}.json"), "w"), indent=1, default=str)
