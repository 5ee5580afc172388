"""Long-file edits through the official openai client: with and without a prediction (n-gram on).

    python benchmarks/results/longfile-1.5b-2026-11-25-epyc-bf16/run.py OUT.json --model qwen2.5-coder-1.5b --no-prefix-cache
"""
import sys, time, json, shlex
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))  # benchmarks/_server.py
from _server import serve
from openai import OpenAI

src = open(shlex.__file__).read()
RULE = " Reply with the whole updated file in one code block, nothing else."
tasks = [
    ("rename", "In this file, rename the method `read_token` to `next_raw_token` everywhere." + RULE),
    ("hints", "Add type hints to every function and method signature in this file." + RULE),
    ("posix", "Change the default value of `posix` in `split` to True." + RULE),
]
out_path, args = sys.argv[1], sys.argv[2:]
results = []
with serve(args) as (proc, url):
    client = OpenAI(base_url=url + "/v1", api_key="x", timeout=3600)
    for name, instr in tasks:
        msgs = [{"role": "user", "content": f"{instr}\n\n```python\n{src}```"}]
        row = {"task": name}
        for mode in ("none", "pred"):
            extra = {"prediction": {"type": "content", "content": f"```python\n{src}```"}} if mode == "pred" else {}
            t = time.perf_counter()
            r = client.chat.completions.create(model="default", messages=msgs, temperature=0, max_tokens=4096, extra_body=extra)
            dt = time.perf_counter() - t
            fs = (r.model_extra or {}).get("foretell", {})
            row[mode] = {"s": round(dt, 2), "tokens": r.usage.completion_tokens, "passes": fs.get("forward_passes"),
                         "decode_s": round(fs.get("decode_s", 0), 2), "ttft_s": round(fs.get("ttft_s", 0), 2),
                         "sources": fs.get("sources"), "text": r.choices[0].message.content}
            print(name, mode, {k: v for k, v in row[mode].items() if k != "text"}, flush=True)
        row["ratio"] = round(row["none"]["s"] / row["pred"]["s"], 3)
        row["identical"] = row["none"]["text"] == row["pred"]["text"]
        print(name, "ratio", row["ratio"], "identical", row["identical"], flush=True)
        results.append(row)
json.dump(results, open(out_path, "w"), indent=1)
