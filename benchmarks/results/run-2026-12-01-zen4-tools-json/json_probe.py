"""JSON edits through the official client: response_format json_object against free text, each with and without the
prediction (n-gram lookup on), arms alternating per request, ROUNDS rounds; medians. usage: json_probe.py PORT [ROUNDS]"""
import json, statistics, sys, time
from openai import OpenAI

port, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2
c = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=600)
PKG = {"name": "foretell-web", "version": "0.4.2", "private": True, "type": "module",
       "scripts": {"dev": "vite", "build": "vite build", "preview": "vite preview", "test": "vitest run", "lint": "eslint src"},
       "dependencies": {"react": "^18.3.1", "react-dom": "^18.3.1", "zustand": "^4.5.2", "openai": "^4.52.0"},
       "devDependencies": {"vite": "^5.3.1", "vitest": "^1.6.0", "eslint": "^9.5.0", "typescript": "^5.4.5",
                           "@vitejs/plugin-react": "^4.3.1", "@types/react": "^18.3.3"},
       "engines": {"node": ">=18"}}
CFG = {"server": {"host": "0.0.0.0", "port": 8080, "workers": 4, "timeout_s": 30},
       "database": {"url": "postgres://app@db/app", "pool": {"min": 2, "max": 10}, "ssl": False},
       "features": [{"name": "search", "enabled": True}, {"name": "export", "enabled": False},
                    {"name": "billing", "enabled": True, "plans": ["free", "pro", "team"]}],
       "logging": {"level": "info", "format": "json", "sinks": ["stdout", "file"]}}
TASKS = {
    "pkg_bump": (PKG, "Bump vitest to ^2.0.0 and add a \"format\": \"prettier -w src\" script."),
    "cfg_enable": (CFG, "Enable the export feature and raise the pool max to 20."),
    "cfg_rename": (CFG, "Rename the key \"sinks\" to \"outputs\"."),
}
res = {}
for name, (doc, instr) in TASKS.items():
    text = json.dumps(doc, indent=2)
    msgs = [{"role": "user", "content": f"{instr} Reply with the whole JSON document only.\n\n{text}"}]
    arms = {"json+pred": ({"type": "json_object"}, text), "json": ({"type": "json_object"}, None),
            "free+pred": (None, text), "free": (None, None)}
    for arm, (rf, pred) in arms.items():  # warm-up: the prompt in the prefix cache for every arm
        pass
    c.chat.completions.create(model="default", messages=msgs, max_tokens=1, temperature=0)
    times = {a: [] for a in arms}; outs = {}
    for r in range(rounds):
        for arm in (list(arms) if r % 2 == 0 else list(reversed(arms))):
            rf, pred = arms[arm]
            kw = {}
            if rf: kw["response_format"] = rf
            if pred: kw["prediction"] = {"type": "content", "content": pred}
            t0 = time.time()
            out = c.chat.completions.create(model="default", messages=msgs, max_tokens=700, temperature=0, **kw)
            times[arm].append(time.time() - t0)
            outs[arm] = (out.choices[0].message.content, out.usage.completion_tokens, out.usage.completion_tokens_details.accepted_prediction_tokens)
    med = {a: statistics.median(v) for a, v in times.items()}
    res[name] = {"median_s": med, "tokens": {a: o[1] for a, o in outs.items()}, "accepted": {a: o[2] for a, o in outs.items()},
                 "json_same": outs["json"][0] == outs["json+pred"][0], "free_same": outs["free"][0] == outs["free+pred"][0],
                 "json_valid": all(_ok for _ok in [bool(json.loads(outs["json"][0]))])}
    print(name, {a: round(v, 2) for a, v in med.items()}, "tokens", res[name]["tokens"], "acc", res[name]["accepted"],
          "same", res[name]["json_same"], res[name]["free_same"], flush=True)
json.dump(res, open(sys.argv[3] if len(sys.argv) > 3 else "json_probe.json", "w"), indent=1)
