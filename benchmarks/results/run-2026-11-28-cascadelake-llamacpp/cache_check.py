import sys, time
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt, prediction_text
from openai import OpenAI
c = OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="x")
m = c.models.list().data[0].id
instr, f, style = tasks[sys.argv[2]]
msgs = [{"role": "user", "content": prompt(instr, f, style)}]
for i in range(3):
    t = time.perf_counter()
    r = c.chat.completions.create(model=m, messages=msgs, temperature=0, max_tokens=int(sys.argv[3]) if len(sys.argv) > 3 else 64)
    d = r.usage.prompt_tokens_details
    print(round(time.perf_counter() - t, 2), r.usage.completion_tokens, d.cached_tokens if d else None, (r.model_extra or {}).get("foretell", {}).get("forward_passes"))
