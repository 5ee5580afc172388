import sys, time, random
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt
from openai import OpenAI
c = OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="x")
m = c.models.list().data[0].id
for name in ("tests_py", "explain_go"):
    instr, f, style = tasks[name]
    for i in range(2):
        msgs = [{"role": "user", "content": f"Request {random.random()}.\n" + prompt(instr, f, style)}]  # cold: a new first line
        t = time.perf_counter()
        r = c.chat.completions.create(model=m, messages=msgs, temperature=0, max_tokens=1)
        dt = time.perf_counter() - t
        print(name, r.usage.prompt_tokens, "prompt tokens, cold, 1 token:", round(dt, 2), "s", round(r.usage.prompt_tokens / dt, 1), "tok/s", flush=True)
