"""Plain decoding (speculation none) on two servers (8013 old, 8014 new), ABBA, 256 tokens, five held-out prompts."""
import json, time, statistics, importlib.util, openai
spec = importlib.util.spec_from_file_location("h", "/work/main/tmp/heldout_tasks.py"); h = importlib.util.module_from_spec(spec); spec.loader.exec_module(h)
A, B = (openai.OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x", timeout=900) for p in (8013, 8014))
M = A.models.list().data[0].id
xs = []
for name, path, lang, instr, style in h.T[::2]:
    msgs = h.messages(style, lang, open(path).read(), instr)
    for c in (A, B): c.chat.completions.create(model=M, messages=msgs, temperature=0, max_tokens=1)
    t = {id(A): [], id(B): []}; texts = set()
    for c in (A, B, B, A):
        s = time.perf_counter()
        r = c.chat.completions.create(model=M, messages=msgs, temperature=0, max_tokens=256, extra_body={"speculation": {"method": "none"}})
        t[id(c)].append(time.perf_counter() - s); texts.add(r.choices[0].message.content)
    xs.append(sum(t[id(A)]) / sum(t[id(B)]))
    print(json.dumps({"name": name, "plain_old_over_new": round(xs[-1], 3), "new_s": round(sum(t[id(B)]) / 2, 2), "same": len(texts) == 1}), flush=True)
print("plain old/new time geomean", round(statistics.geometric_mean(xs), 3), "min", round(min(xs), 3))
