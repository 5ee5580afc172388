"""40 more calls through the official openai client than the usual probe: each succeeds or fails with a 4xx
that names the field. Start a server first (scripts/serve --port 8011), then: python probe_openai_surface.py 8011
"""
"""Wider OpenAI surface through the official client: every call succeeds, or fails with a 4xx naming the field."""
import sys, json, httpx
import openai
from openai import OpenAI
port = sys.argv[1] if len(sys.argv) > 1 else "8011"
c = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=600)
model = c.models.list().data[0].id
FILE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
msgs = [{"role": "user", "content": "Rename add to plus. Reply with the whole file only.\n\n```python\n" + FILE + "```"}]
res = []
def run(name, fn, expect_ok=True):
    try:
        r = fn()
        res.append((name, "ok", str(r)[:150]))
    except openai.APIStatusError as e:
        res.append((name, f"HTTP {e.status_code}", str(e.body)[:200]))
    except Exception as e:
        res.append((name, "EXC " + type(e).__name__, str(e)[:200]))
base = dict(model=model, messages=msgs, max_tokens=24, temperature=0)
def text(r): return r.choices[0].message.content
run("max_completion_tokens", lambda: text(c.chat.completions.create(model=model, messages=msgs, max_completion_tokens=16, temperature=0)))
run("stream include_usage", lambda: [ch.usage for ch in c.chat.completions.create(**base, stream=True, stream_options={"include_usage": True})][-1])
run("presence/frequency penalty", lambda: text(c.chat.completions.create(**base, presence_penalty=0.5, frequency_penalty=0.5)))
run("logit_bias", lambda: text(c.chat.completions.create(**base, logit_bias={"151643": -100})))
run("top_logprobs", lambda: c.chat.completions.create(**base, logprobs=True, top_logprobs=3).choices[0].logprobs.content[0])
run("seed+top_p", lambda: text(c.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0.8, top_p=0.9, seed=3)))
run("user/metadata/store", lambda: text(c.chat.completions.create(**base, user="u1", metadata={"a": "b"}, store=False)))
run("service_tier", lambda: text(c.chat.completions.create(**base, service_tier="auto")))
run("response_format json_object", lambda: text(c.chat.completions.create(**base, response_format={"type": "json_object"})))
run("response_format text", lambda: text(c.chat.completions.create(**base, response_format={"type": "text"})))
run("developer role", lambda: text(c.chat.completions.create(model=model, max_tokens=16, temperature=0, messages=[{"role": "developer", "content": "Be brief."}] + msgs)))
run("system parts", lambda: text(c.chat.completions.create(model=model, max_tokens=16, temperature=0, messages=[{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}] + msgs)))
run("message name", lambda: text(c.chat.completions.create(model=model, max_tokens=16, temperature=0, messages=[{"role": "user", "name": "bob", "content": "hi"}])))
run("assistant prefill history", lambda: text(c.chat.completions.create(model=model, max_tokens=16, temperature=0, messages=msgs + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}])))
run("prediction parts", lambda: c.chat.completions.create(**base, prediction={"type": "content", "content": [{"type": "text", "text": FILE}]}).usage)
run("stop list", lambda: text(c.chat.completions.create(**base, stop=["\n", "return"])))
run("n=2 stream", lambda: len([ch for ch in c.chat.completions.create(**base, n=2, stream=True)]))
run("tools (no call)", lambda: text(c.chat.completions.create(**base, tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}])))
run("tool_choice none", lambda: text(c.chat.completions.create(**base, tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}], tool_choice="none")))
run("parallel_tool_calls", lambda: text(c.chat.completions.create(**base, parallel_tool_calls=False, tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}])))
run("reasoning_effort", lambda: text(c.chat.completions.create(**base, reasoning_effort="low")))
run("modalities text", lambda: text(c.chat.completions.create(**base, modalities=["text"])))
run("extra_body top_k", lambda: text(c.chat.completions.create(**base, extra_body={"top_k": 5})))
run("completions list prompt", lambda: [ch.text for ch in c.completions.create(model=model, prompt=["def f(", "x = "], max_tokens=8, temperature=0).choices])
run("completions echo", lambda: c.completions.create(model=model, prompt="def f(", max_tokens=8, temperature=0, echo=True).choices[0].text)
run("completions token ids prompt", lambda: c.completions.create(model=model, prompt=[1, 2, 3], max_tokens=4, temperature=0).choices[0].text)
run("completions logprobs=2", lambda: c.completions.create(model=model, prompt="def f(", max_tokens=4, temperature=0, logprobs=2).choices[0].logprobs.top_logprobs)
run("completions suffix", lambda: c.completions.create(model=model, prompt="def f(", suffix="\n", max_tokens=4, temperature=0).choices[0].text)
run("completions best_of", lambda: c.completions.create(model=model, prompt="def f(", max_tokens=4, temperature=0, best_of=1).choices[0].text)
run("completions prediction", lambda: c.completions.create(model=model, prompt="x = 1\n", max_tokens=8, temperature=0, extra_body={"prediction": {"type": "content", "content": "y = 2\n"}}).usage)
run("models.retrieve", lambda: c.models.retrieve(model).id)
run("with_raw_response headers", lambda: dict(c.chat.completions.with_raw_response.create(**base).headers).get("content-type"))
run("max_tokens 0", lambda: text(c.chat.completions.create(model=model, messages=msgs, max_tokens=0)))
run("temperature 2", lambda: text(c.chat.completions.create(model=model, messages=msgs, max_tokens=8, temperature=2.0)))
run("empty messages", lambda: text(c.chat.completions.create(model=model, messages=[], max_tokens=8)))
run("image part", lambda: text(c.chat.completions.create(model=model, max_tokens=8, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])))
run("tool message history", lambda: text(c.chat.completions.create(model=model, max_tokens=8, temperature=0, messages=msgs + [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "42"}])))
r = httpx.get(f"http://127.0.0.1:{port}/health"); res.append(("GET /health", r.status_code, r.text[:80]))
r = httpx.get(f"http://127.0.0.1:{port}/v1/models/nope"); res.append(("GET unknown model", r.status_code, r.text[:120]))
r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}); res.append(("bad json", r.status_code, r.text[:160]))
for n, s, d in res: print(f"{s!s:10} {n:32} {d}")
