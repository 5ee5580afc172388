"""One server, one or more arms, the held-out-like tasks (the 14 of run-2026-11-28-spr-heldout and the 8 of this
round) through the official openai client.
    python peer_probe.py PORT LABEL ROUNDS ARMS(pred,none,draft) [tasks|all] [max_tokens]
A warm-up request per task fills the server's prompt cache; the arms alternate per request; temperature 0, or with TEMP=default none sent (the server's default 1.0), with TEMP=x that one; SEED=n sends that seed; OUT=DIR writes res-LABEL.json there (default: here)."""
import sys, time, json, os, statistics, importlib.util
from openai import OpenAI
port, label, rounds, arms = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
only = sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[5] != "all" else None
MAXT = int(sys.argv[6]) if len(sys.argv) > 6 else 2048
HERE = os.path.dirname(os.path.abspath(__file__))
TEMP = os.environ.get("TEMP", "0")
TEMPKW = {} if TEMP == "default" else {"temperature": float(TEMP)}
if os.environ.get("SEED"): TEMPKW["seed"] = int(os.environ["SEED"])  # seeded: the same reply with and without the prediction

def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(os.path.dirname(path)) + "_tasks", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod

sets = [load(os.path.join(HERE, "..", "run-2026-11-28-spr-heldout", "tasks.py")), load(os.path.join(HERE, "tasks.py"))]
c = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=1800)
model = c.models.list().data[0].id
res = {}
for mod in sets:
    for name, (instr, f, style) in mod.tasks.items():
        if only and name not in only: continue
        msgs = [{"role": "user", "content": mod.prompt(instr, f, style)}]
        c.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=1)
        for r in range(rounds):
            for arm in (arms if r % 2 == 0 else arms[::-1]):
                kw = dict(model=model, messages=msgs, max_tokens=MAXT, **TEMPKW)
                if arm in ("pred", "draft"): kw["prediction"] = {"type": "content", "content": mod.prediction_text(f, style)}
                if arm == "draft": kw["extra_body"] = {"speculation": {"method": "draft"}}  # + the server's draft model
                t = time.perf_counter(); resp = c.chat.completions.create(**kw); dt = time.perf_counter() - t
                extra = getattr(resp, "model_extra", {}) or {}
                res.setdefault(name, {}).setdefault(arm, []).append(dict(t=dt, text=resp.choices[0].message.content,
                    tok=resp.usage.completion_tokens, ptok=resp.usage.prompt_tokens,
                    extra={k: v for k, v in extra.items() if k in ("foretell", "timings")}))
        line = " | ".join(f"{arm} {statistics.median(x['t'] for x in res[name][arm]):6.2f}s {res[name][arm][0]['tok']:4}tok" for arm in arms)
        print(f"{label} {name:14} {line}", flush=True)
json.dump(res, open(os.path.join(os.environ.get("OUT", HERE), f"res-{label}.json"), "w"), indent=1, default=str)
