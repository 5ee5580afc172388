import sys, time
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt, prediction_text
from openai import OpenAI
c = OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="x")
m = c.models.list().data[0].id
def run(msgs, n, spec=None):
    kw = dict(model=m, messages=msgs, temperature=0, max_tokens=n, stream=True, stream_options={"include_usage": True})
    if spec: kw["extra_body"] = {"speculation": spec}
    t = time.perf_counter(); first = None; toks = 0
    for ch in c.chat.completions.create(**kw):
        if ch.choices and ch.choices[0].delta.content and first is None: first = time.perf_counter() - t
        if ch.usage: toks = ch.usage.completion_tokens
    w = time.perf_counter() - t
    return round(first, 2), round(w, 2), toks, round((w - first) / max(1, toks - 1) * 1000, 1)
short = [{"role": "user", "content": "Write a long story about a robot who learns to paint."}]
instr, f, style = tasks["explain_go"]
long = [{"role": "user", "content": prompt(instr, f, style)}]
spec = {"method": sys.argv[2]} if len(sys.argv) > 2 and sys.argv[2] != "-" else None
for name, msgs in (("short", short), ("long", long)):
    run(msgs, 1, spec)
    for i in range(2):
        print(name, spec, "ttft, wall, tokens, ms/token after first:", run(msgs, 200, spec), flush=True)
