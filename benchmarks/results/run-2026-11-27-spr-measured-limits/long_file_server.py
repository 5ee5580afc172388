"""A 612-line file (matplotlib's spines.py, copied to /tmp/spines.py) through a running server and the official
openai client: a rename, the whole file asked back, streamed, with and without the prediction, in the order
given (none pred pred none). Start the server first: .venv/bin/foretell serve --port 8011
"""
import sys, time
from openai import OpenAI
c = OpenAI(base_url="http://127.0.0.1:8011/v1", api_key="x", timeout=3600)
model = c.models.list().data[0].id
code = open("/tmp/spines.py").read()
msg = [{"role": "user", "content": "Rename the method `set_patch_arc` to `set_arc_patch` everywhere. Reply with the whole file only, in one code block.\n\n```python\n" + code + "```"}]
order = sys.argv[1:] or ["none", "pred"]
for which in order:
    t = time.perf_counter(); first = None; text = ""; usage = None
    kw = dict(prediction={"type": "content", "content": code}) if which == "pred" else {}
    for ch in c.chat.completions.create(model=model, messages=msg, max_tokens=9000, temperature=0, stream=True, stream_options={"include_usage": True}, **kw):
        if ch.choices and ch.choices[0].delta.content:
            if first is None: first = time.perf_counter() - t
            text += ch.choices[0].delta.content
        if ch.usage: usage = ch.usage
    dt = time.perf_counter() - t
    print(which, f"{dt:.1f}s ttft={first:.2f}s", usage.prompt_tokens, usage.completion_tokens, usage.completion_tokens_details, "cached", getattr(usage.prompt_tokens_details, "cached_tokens", None), "hash", hash(text), "renamed" , text.count("set_arc_patch"), flush=True)
