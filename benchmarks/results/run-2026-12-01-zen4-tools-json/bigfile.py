import sys, time
from openai import OpenAI
port, path, instr = sys.argv[1], sys.argv[2], sys.argv[3]
arms = sys.argv[4].split(",") if len(sys.argv) > 4 else ["pred", "none"]
c = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=3600)
src = open(path).read()
msgs = [{"role": "user", "content": f"{instr} Reply with the whole file in a code block and nothing else.\n\n```python\n{src}```"}]
res = {}
for arm in arms:
    kw = {"prediction": {"type": "content", "content": src}} if arm == "pred" else {}
    t0 = time.time(); first = None; text = ""; usage = None
    for ch in c.chat.completions.create(model="default", messages=msgs, temperature=0, max_tokens=12000, stream=True,
                                        stream_options={"include_usage": True}, **kw):
        if ch.choices and ch.choices[0].delta.content:
            if first is None: first = time.time() - t0
            text += ch.choices[0].delta.content
        if ch.usage: usage = ch.usage
    wall = time.time() - t0
    res[arm] = (wall, text)
    print(f"{arm}: wall {wall:.1f}s ttft {first:.1f}s tokens {usage.completion_tokens} prompt {usage.prompt_tokens} acc {usage.completion_tokens_details.accepted_prediction_tokens}", flush=True)
if len(res) == 2:
    a, b = res.values()
    print("identical", a[1] == b[1], "ratio none/pred %.3f" % (res['none'][0] / res['pred'][0]))
