"""The same edit through /v1/chat/completions and /v1/responses, with and without the prediction, alternating
(greedy, prefix cache warm after a first untimed round). usage: probe.py PORT ROUNDS"""
import json, statistics, sys, time
from pathlib import Path

import openai

ROOT = Path(__file__).resolve().parents[3]

port, rounds = int(sys.argv[1]), int(sys.argv[2])
c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=600)
FILES = ["src/foretell/server/limits.py", "src/foretell/server/provenance.py", "src/foretell/server/errors.py"]
EDITS = ["Rename BodySizeLimit to BodyLimit.", "Rename ProvenanceTape to SpanTape.", "Rename APIError to ServerError."]


def run(api, path, edit, pred):
    original = (ROOT / path).read_text()
    msg = f"{edit} Reply with the full file only.\n\n```python\n{original}```"
    extra = {"prediction": {"type": "content", "content": original}} if pred else {}
    t = time.perf_counter()
    if api == "chat":
        r = c.chat.completions.create(model="default", messages=[{"role": "user", "content": msg}], temperature=0,
                                      extra_body=extra)
        text, usage = r.choices[0].message.content, r.usage.completion_tokens
    else:
        r = c.responses.create(model="default", input=msg, temperature=0, extra_body=extra)
        text, usage = r.output_text, r.usage.output_tokens
    return time.perf_counter() - t, text, usage


rows = {}
for rnd in range(rounds + 1):
    for path, edit in zip(FILES, EDITS):
        for api in ("chat", "responses"):
            for pred in (True, False):
                s, text, n = run(api, path, edit, pred)
                if rnd:  # round 0 warms the prefix cache
                    rows.setdefault((path, api, pred), []).append((s, text, n))
out = []
for path in FILES:
    texts = {rows[(path, a, p)][0][1] for a in ("chat", "responses") for p in (True, False)}
    med = {(a, p): statistics.median(x[0] for x in rows[(path, a, p)]) for a in ("chat", "responses") for p in (True, False)}
    out.append({"file": path, "tokens": rows[(path, "chat", True)][0][2], "identical": len(texts) == 1,
                **{f"{a}_{'pred' if p else 'ngram'}_s": round(v, 3) for (a, p), v in med.items()}})
    o = out[-1]
    print(f"{path:36s} {o['tokens']:4d} tok identical={o['identical']} chat {o['chat_ngram_s']:.2f}/{o['chat_pred_s']:.2f} s"
          f" ({o['chat_ngram_s']/o['chat_pred_s']:.2f}x)  responses {o['responses_ngram_s']:.2f}/{o['responses_pred_s']:.2f} s"
          f" ({o['responses_ngram_s']/o['responses_pred_s']:.2f}x)")
json.dump(out, open("probe.json", "w"), indent=1)
