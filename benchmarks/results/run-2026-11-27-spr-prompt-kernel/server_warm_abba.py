"""Through the server with the official ``openai`` client's transport (httpx), prefix cache on: a small file edit
and its verbatim copy, with and without the file as the prediction, three rounds in ABBA order after a first
request that fills the cache. Prints wall time, time to first token, passes and cached prompt tokens.

Start a server first (``scripts/serve --port 8011``), then from the repository root:
.venv/bin/python benchmarks/results/run-2026-11-27-spr-prompt-kernel/server_warm_abba.py 8011
"""
import sys
import textwrap
import time

import httpx

PORT = sys.argv[1] if len(sys.argv) > 1 else "8011"
URL = f"http://127.0.0.1:{PORT}/v1"
FILE = textwrap.dedent('''\
    import json
    from dataclasses import dataclass


    @dataclass
    class Item:
        name: str
        price: float
        qty: int = 1

        def total(self):
            return self.price * self.qty


    def load(path):
        with open(path) as f:
            data = json.load(f)
        return [Item(**d) for d in data]


    def summary(items):
        """Total value of all items."""
        return sum(i.total() for i in items)
    ''')
TASKS = {
    "rename": "Rename the class Item to Product everywhere. Reply with the full file only.\n\n" + FILE,
    "verbatim": "Repeat this file exactly, nothing else.\n\n" + FILE,
}
model = httpx.get(f"{URL}/models").json()["data"][0]["id"]


def ask(prompt: str, prediction: str | None) -> tuple[float, dict]:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 400}
    if prediction is not None:
        body["prediction"] = {"type": "content", "content": prediction}
    start = time.perf_counter()
    reply = httpx.post(f"{URL}/chat/completions", json=body, timeout=600).json()
    return time.perf_counter() - start, reply


for name, prompt in TASKS.items():
    ask(prompt, None)  # fills the prefix cache
    texts = set()
    for round_ in range(3):
        for prediction in (None, FILE) if round_ % 2 == 0 else (FILE, None):
            wall, reply = ask(prompt, prediction)
            stats = reply["foretell"]
            texts.add(reply["choices"][0]["message"]["content"])
            print(f"{name:9s} {'prediction' if prediction else 'none':10s} {wall:.2f} s, ttft {stats['ttft_s']:.3f} s, "
                  f"{stats['forward_passes']} passes, cached {reply['usage']['prompt_tokens_details']['cached_tokens']}"
                  f" of {reply['usage']['prompt_tokens']}")
    print(f"{name}: {len(texts)} distinct text(s)")
