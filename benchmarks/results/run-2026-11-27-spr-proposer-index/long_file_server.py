# Against `scripts/serve --port 8011` (the default model); see NOTES.md.
"""A 491-line file, a 3-line edit, through the openai client: with and without the prediction, alternating."""
import time, openai, sys
c = openai.OpenAI(base_url="http://127.0.0.1:8011/v1", api_key="x")
code = open("/root/.pyenv/versions/3.11.7/lib/python3.11/textwrap.py").read()
instr = sys.argv[1] if len(sys.argv) > 1 else "Rename the function `dedent` to `remove_common_indent` everywhere (its definition and every use). Return the whole file, nothing else."
msgs = [{"role": "user", "content": instr + "\n\n```python\n" + code + "```"}]
def run(pred):
    t = time.perf_counter()
    r = c.chat.completions.create(model="default", messages=msgs, temperature=0, max_tokens=6000,
                                  extra_body={"prediction": {"type": "content", "content": code}} if pred else {})
    return time.perf_counter() - t, r
res = {True: [], False: []}
texts = {}
for rnd in range(2):
    for pred in ((True, False) if rnd % 2 == 0 else (False, True)):
        dt, r = run(pred)
        res[pred].append(dt); texts.setdefault(pred, r.choices[0].message.content)
        fs = getattr(r, "foretell", None) or (r.model_extra or {}).get("foretell")
        print(f"pred={pred} {dt:.1f}s tokens={r.usage.completion_tokens} fin={r.choices[0].finish_reason} stats={fs}", flush=True)
print("same:", texts[True] == texts[False], "ratio (no pred / pred):", [round(a / b, 3) for a, b in zip(res[False], res[True])])
out = texts[True]
print("changed lines vs file:", sum(1 for a, b in zip(code.splitlines(), out.splitlines()) if a != b), len(out.splitlines()))
