"""The bench's verbatim,concurrency sequence on a vLLM server with foretell's plugin (the new warm-up: the first task's
prompt, then the 8-request batch, 16 tokens each; the two tasks; the timed 8-request batch), through the official client,
each request's wall time appended to /tmp/calib.txt. With the proposer patched to append each calibrator sample
("tokens seconds rows") to the same file, it shows what the cost line was fed. Usage: python calibrator_drive.py PORT"""
import sys, time
from concurrent.futures import ThreadPoolExecutor
from openai import OpenAI
from transformers import AutoTokenizer
from foretell.bench.workloads import verbatim_tasks, edit_tasks, WorkloadOptions
tok = AutoTokenizer.from_pretrained("/root/.cache/foretell/models/qwen2.5-coder-0.5b-instruct-bf16")
opts = WorkloadOptions(max_tokens=256)
conc = verbatim_tasks(tok, opts) + edit_tasks(tok, WorkloadOptions(max_tokens=256))
snake = verbatim_tasks(tok, opts)
c = OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="x", timeout=3600)
model = c.models.list().data[0].id
def pred(t): return tok.decode(list(t.prediction_ids)) if t.prediction_ids else None
def run(t, n, label):
    body = {"prediction": {"type": "content", "content": pred(t)}} if pred(t) else {}
    s = time.perf_counter()
    c.completions.create(model=model, prompt=list(t.prompt_ids), max_tokens=n, temperature=0, extra_body=body)
    open("/tmp/calib.txt", "a").write(f"# {label} {t.name} {time.perf_counter()-s:.2f}\n")
jobs = [conc[i % len(conc)] for i in range(8)]
run(snake[0], 16, "warm1")
with ThreadPoolExecutor(8) as p: list(p.map(lambda t: run(t, 16, "warm8"), jobs))
for t in snake: run(t, 256, "task")
with ThreadPoolExecutor(8) as p: list(p.map(lambda t: run(t, 256, "conc"), jobs))
