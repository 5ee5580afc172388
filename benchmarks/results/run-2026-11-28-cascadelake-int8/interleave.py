"""Plain decoding, two servers alternating per request: ms per token after the first (streamed), short and long prompt."""
import sys, time, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt
from openai import OpenAI
servers = {"foretell": ("8011", {"speculation": {"method": "none"}}), "llama.cpp": ("8021", {})}
clients = {k: (OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x"), extra) for k, (p, extra) in servers.items()}
short = [{"role": "user", "content": "Write a long story about a robot who learns to paint."}]
instr, f, style = tasks["explain_go"]
long = [{"role": "user", "content": prompt(instr, f, style)}]
def run(c, extra, msgs, n):
    m = c.models.list().data[0].id
    t = time.perf_counter(); first = None; toks = 0
    for ch in c.chat.completions.create(model=m, messages=msgs, temperature=0, max_tokens=n, stream=True,
                                        stream_options={"include_usage": True}, extra_body=extra):
        if ch.choices and ch.choices[0].delta.content and first is None: first = time.perf_counter() - t
        if ch.usage: toks = ch.usage.completion_tokens
    return (time.perf_counter() - t - first) / max(1, toks - 1) * 1000
for name, msgs in (("short", short), ("long", long)):
    for k, (c, extra) in clients.items(): run(c, extra, msgs, 2)  # warm the prompt caches
    res = {k: [] for k in clients}
    for r in range(3):
        for k in (list(clients) if r % 2 == 0 else list(clients)[::-1]):
            res[k].append(run(*clients[k], msgs, 120))
    print(name, {k: [round(v, 1) for v in vs] for k, vs in res.items()}, flush=True)
