# Against `scripts/serve --port 8011` (the default model); see NOTES.md.
import openai, json
c = openai.OpenAI(base_url="http://127.0.0.1:8011/v1", api_key="x")
code = open("/root/.pyenv/versions/3.11.7/lib/python3.11/textwrap.py").read()
instr = "Rename the function `dedent` to `remove_common_indent` everywhere (its definition and every use). Return the whole file, nothing else."
msgs = [{"role": "user", "content": instr + "\n\n```python\n" + code + "```"}]
r = c.chat.completions.create(model="default", messages=msgs, temperature=0, max_tokens=6000, extra_body={"prediction": {"type": "content", "content": code}})
json.dump({"msgs": msgs, "code": code, "out": r.choices[0].message.content}, open("/tmp/long51.json", "w"))
print(r.usage.completion_tokens)
