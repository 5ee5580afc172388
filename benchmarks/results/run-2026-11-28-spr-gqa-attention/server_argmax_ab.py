"""Two servers from one fresh clone: 8011 (default: the head's int8 argmax copy) and 8012 (--no-argmax-head).
Requests through the official openai client, alternating servers (order swapped each round), one warm-up round
(fills each server's prefix cache), then 6 rounds; medians and the median paired ratio; texts compared."""
import statistics, time
from openai import OpenAI
snake = open("src/foretell/bench/data/snake.py").read()
clients = {p: OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="x", timeout=900) for p in (8011, 8012)}
cases = {
    "open question, 160 tokens": dict(messages=[{"role": "user", "content": "Explain how a hash map handles collisions, with a short Python example."}], max_tokens=160),
    "rename with the prediction": dict(messages=[{"role": "user", "content": "Rename the class Snake to Serpent. Reply with the full file only.\n\n```python\n" + snake + "```"}], max_tokens=1000, prediction={"type": "content", "content": snake}),
    "rename, n-gram lookup": dict(messages=[{"role": "user", "content": "Rename the class Snake to Serpent. Reply with the full file only.\n\n```python\n" + snake + "```"}], max_tokens=1000),
    "port to JavaScript with the prediction": dict(messages=[{"role": "user", "content": "Port this file to JavaScript. Reply with the full file only.\n\n```python\n" + snake + "```"}], max_tokens=200, prediction={"type": "content", "content": snake}),
}
times, texts = {}, {}
for rnd in range(7):
    for name, kw in cases.items():
        order = (8011, 8012) if rnd % 2 else (8012, 8011)
        for port in order:
            t0 = time.perf_counter()
            r = clients[port].chat.completions.create(model="default", temperature=0, **kw)
            dt = time.perf_counter() - t0
            texts.setdefault(name, set()).add(r.choices[0].message.content)
            if rnd: times.setdefault((name, port), []).append(dt)
            if rnd == 1 and port == 8011: print(name, r.usage.completion_tokens, "tokens", flush=True)
for name in cases:
    a, b = times[(name, 8011)], times[(name, 8012)]
    print(f"{name}: copy {statistics.median(a):.2f} s, no copy {statistics.median(b):.2f} s, paired {statistics.median(x / y for x, y in zip(a, b)):.3f}, same text on both: {len(texts[name]) == 1}")
