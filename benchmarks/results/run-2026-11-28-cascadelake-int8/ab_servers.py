"""Two foretell servers side by side, alternating per request: int8 products (port A) against the bf16 route
(port B), each with and without the prediction, through the official openai client.

    python ab_servers.py PORT_A PORT_B ROUNDS [all|task,task] [max_tokens]

Per task: a warm-up request on each server (the prefix cache), then per round the four requests in an order that
flips every round. Prints time ratios A/B per arm, whether A wrote B's text, and each server's pred/none ratio."""
import json, os, statistics, sys, time
from openai import OpenAI
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt, prediction_text
pa, pb, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
only = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] != "all" else None
maxt = int(sys.argv[5]) if len(sys.argv) > 5 else 2048
clients = {k: OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x", timeout=1800) for k, p in (("A", pa), ("B", pb))}
model = clients["A"].models.list().data[0].id
res = {}
for name, (instr, f, style) in tasks.items():
    if only and name not in only:
        continue
    msgs = [{"role": "user", "content": prompt(instr, f, style)}]
    for c in clients.values():
        c.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=1)
    arms = [(s, a) for s in "AB" for a in ("pred", "none")]
    for r in range(rounds):
        for server, arm in (arms if r % 2 == 0 else arms[::-1]):
            kw = dict(model=model, messages=msgs, max_tokens=maxt, temperature=0)
            if arm == "pred":
                kw["prediction"] = {"type": "content", "content": prediction_text(f, style)}
            t = time.perf_counter()
            resp = clients[server].chat.completions.create(**kw)
            dt = time.perf_counter() - t
            st = (resp.model_extra or {}).get("foretell") or {}
            res.setdefault(name, {}).setdefault(server + arm, []).append(
                dict(t=dt, text=resp.choices[0].message.content, tok=resp.usage.completion_tokens,
                     passes=st.get("forward_passes")))
    a = res[name]
    med = {k: statistics.median(x["t"] for x in v) for k, v in a.items()}
    same_ab = a["Apred"][0]["text"] == a["Bpred"][0]["text"]
    lossless = all(x["text"] == a[s + "none"][0]["text"] for s in "AB" for x in a[s + "pred"] + a[s + "none"])
    print(f"{name:14} tok A {a['Apred'][0]['tok']:5} B {a['Bpred'][0]['tok']:5} | A/B pred {med['Apred'] / med['Bpred']:.2f} "
          f"none {med['Anone'] / med['Bnone']:.2f} | pred/none speedup A {med['Anone'] / med['Apred']:.2f} "
          f"B {med['Bnone'] / med['Bpred']:.2f} | passes A {a['Apred'][0]['passes']}/{a['Anone'][0]['passes']} "
          f"B {a['Bpred'][0]['passes']}/{a['Bnone'][0]['passes']} | same text A=B {same_ab} lossless {lossless} "
          f"| s: {', '.join(f'{k} {v:.2f}' for k, v in med.items())}", flush=True)
json.dump(res, open(os.path.join(HERE, f"res-ab-{int(time.time())}.json"), "w"), indent=1)
