"""What a step costs in vLLM's speculative server when nothing is drafted (the plugin's server, a request with
`speculation: {"method": "none"}`), against the same request drafting from its prediction and drafting by n-gram
lookup, through the official client, streamed (ms per token after the first). Alternating, ROUNDS rounds.

    python draftless_step.py PORT [ROUNDS]"""
import statistics
import sys
import time

from openai import OpenAI

port = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=1200)
model = client.models.list().data[0].id
code = "".join(f"def f{i}(x):\n    return x * {i} + {i % 7}\n\n" for i in range(40))
messages = [{"role": "user", "content": "Repeat this file exactly, in a code block:\n```python\n" + code + "```"}]
arms = {"none": {"speculation": {"method": "none"}},
        "ngram": {},
        "prediction": {"prediction": {"type": "content", "content": "```python\n" + code + "```"}}}
times: dict[str, list[float]] = {arm: [] for arm in arms}
for r in range(rounds):
    for arm, extra in (arms.items() if r % 2 == 0 else reversed(arms.items())):
        start, first, n = time.perf_counter(), None, 0
        stream = client.chat.completions.create(model=model, messages=messages, max_tokens=160, temperature=0,
                                                stream=True, extra_body=extra)
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                n += 1
                if first is None:
                    first = time.perf_counter()
        end = time.perf_counter()
        # chunks, not tokens, when a step yields several: report decode time per output token via usage-free count
        times[arm].append((end - first, n))
for arm, runs in times.items():
    per_chunk = [1000 * t / max(1, n - 1) for t, n in runs]
    print(f"{arm:10s} decode s {[round(t, 2) for t, _ in runs]} chunks {[n for _, n in runs]} "
          f"ms per chunk median {statistics.median(per_chunk):.1f}")
