"""The tasks of tasks.py through the official openai client against one server, arms alternating per request.
    python probe.py PORT LABEL ROUNDS ARMS(pred,none) [tasks|all]
A warm-up request per task fills the server's prompt cache; temperature 0; writes res-LABEL.json beside this file."""
import sys, time, json, os, statistics, importlib.util
from openai import OpenAI
port, label, rounds, arms = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
only = sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[5] != "all" else None
HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("tasks3", os.path.join(HERE, "tasks.py"))
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
c = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=1800)
model = c.models.list().data[0].id
res = {}
for name, (msgs, prediction) in mod.tasks.items():
    if only and name not in only: continue
    c.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=1)
    for r in range(rounds):
        for arm in (arms if r % 2 == 0 else arms[::-1]):
            kw = dict(model=model, messages=msgs, max_tokens=2048, temperature=0)
            if arm == "pred": kw["prediction"] = {"type": "content", "content": prediction}
            t = time.perf_counter(); resp = c.chat.completions.create(**kw); dt = time.perf_counter() - t
            u = resp.usage
            det = getattr(u, "completion_tokens_details", None)
            res.setdefault(name, {}).setdefault(arm, []).append(dict(t=dt, text=resp.choices[0].message.content,
                tok=u.completion_tokens, ptok=u.prompt_tokens,
                accepted=getattr(det, "accepted_prediction_tokens", None), rejected=getattr(det, "rejected_prediction_tokens", None),
                extra={k: v for k, v in (getattr(resp, "model_extra", {}) or {}).items() if k in ("foretell", "timings")}))
    line = " | ".join(f"{arm} {statistics.median(x['t'] for x in res[name][arm]):6.2f}s {res[name][arm][0]['tok']:4}tok" for arm in arms)
    print(f"{label} {name:12} {line}", flush=True)
json.dump(res, open(os.path.join(HERE, f"res-{label}.json"), "w"), indent=1, default=str)
