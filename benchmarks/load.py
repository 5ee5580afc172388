"""Load on loopback: N concurrent streaming clients with mixed predictions (perfect, edited, garbage, none).

Bounded (a fixed number of requests, a time limit) and it stops by itself. Checks: every request completes
with 200 and no error event, and each greedy output is identical to the same prompt run alone (plain, one
request at a time, before the load). Reports p50/p99 latency and TTFT and the aggregate tok/s.

    flock /tmp/foretell-heavy.lock .venv/bin/python benchmarks/load.py            # default model, fp32
    .venv/bin/python benchmarks/load.py --model DIR --clients 16 --max-tokens 16   # a quick run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _server import serve, stream_chat  # noqa: E402

TOPICS = ["reverses a string", "checks whether a number is prime", "sums a list", "counts vowels in a string",
          "returns the maximum of three numbers", "computes a factorial", "flattens a nested list",
          "merges two sorted lists", "removes duplicates from a list", "converts Celsius to Fahrenheit",
          "computes the n-th Fibonacci number", "checks whether a string is a palindrome",
          "returns the average of a list", "capitalizes every word", "finds the index of an item",
          "computes the greatest common divisor"]
GARBAGE = "The committee will reconvene on Thursday to discuss the harvest festival budget and parking. " * 8


def edited(text: str, rng: random.Random) -> str:
    """The answer with a word replaced and a line dropped (a prediction that is mostly right)."""
    lines = text.split("\n")
    if len(lines) > 2:
        del lines[rng.randrange(1, len(lines))]
    words = "\n".join(lines).split(" ")
    if len(words) > 3:
        words[rng.randrange(len(words))] = "banana"
    return " ".join(words)


def body(topic: str, max_tokens: int, prediction: str | None) -> dict:
    b = {"model": "default", "temperature": 0, "max_tokens": max_tokens,
         "messages": [{"role": "user", "content": f"Write a short Python function that {topic}. Code only."}]}
    if prediction is not None:
        b["prediction"] = {"type": "content", "content": prediction}
    return b


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


async def run(url: str, args) -> dict:
    rng = random.Random(0)
    topics = TOPICS[: max(1, args.clients // 4)]
    limits = httpx.Limits(max_connections=args.clients + 8)
    async with httpx.AsyncClient(timeout=args.time_limit, limits=limits) as client:
        alone = {}
        for t in topics:  # the reference: each prompt alone, plain decoding
            r = await stream_chat(client, url, {**body(t, args.max_tokens, None), "speculation": {"method": "none"}})
            assert r["status"] == 200 and not r["errors"], r
            alone[t] = r["text"]
        kinds = ["perfect", "edited", "garbage", "none"]
        plan = [(topics[i % len(topics)], kinds[(i // len(topics)) % 4]) for i in range(args.clients)]
        preds = {"perfect": lambda t: alone[t], "edited": lambda t: edited(alone[t], rng),
                 "garbage": lambda t: GARBAGE[: max(1, len(alone[t]))], "none": lambda t: None}
        bodies = [body(t, args.max_tokens, preds[k](t)) for t, k in plan]
        start = time.perf_counter()
        results = await asyncio.wait_for(asyncio.gather(*(stream_chat(client, url, b) for b in bodies)), args.time_limit)
        wall = time.perf_counter() - start
    bad = [(plan[i], r["status"], r["errors"][:1]) for i, r in enumerate(results) if r["status"] != 200 or r["errors"]]
    differs = [plan[i] for i, r in enumerate(results) if r["text"] != alone[plan[i][0]]]
    tokens = sum((r["usage"] or {}).get("completion_tokens", 0) for r in results)
    latency = [r["latency_s"] for r in results]
    ttft = [r["ttft_s"] for r in results if r["ttft_s"] is not None]
    return {
        "clients": args.clients, "distinct_prompts": len(topics), "max_tokens": args.max_tokens,
        "completed_200": sum(r["status"] == 200 and not r["errors"] for r in results),
        "failed": bad, "outputs_differing_from_alone": differs,
        "completion_tokens": tokens, "wall_s": round(wall, 2), "aggregate_tok_s": round(tokens / wall, 2),
        "latency_p50_s": round(pct(latency, 0.5), 2), "latency_p99_s": round(pct(latency, 0.99), 2),
        "ttft_p50_s": round(pct(ttft, 0.5), 2) if ttft else None, "ttft_p99_s": round(pct(ttft, 0.99), 2) if ttft else None,
        "accepted_prediction_tokens": sum((r["usage"] or {}).get("completion_tokens_details", {}).get(
            "accepted_prediction_tokens", 0) for r in results),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model (default: the packaged default model)")
    p.add_argument("--dtype", default="float32", help="float32 so batched and alone outputs are comparable")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--max-num-seqs", type=int, default=8)
    p.add_argument("--time-limit", type=float, default=1500.0, help="seconds for the load phase")
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = p.parse_args(argv)
    serve_args = ["--dtype", args.dtype, "--device", "cpu", "--max-num-seqs", str(args.max_num_seqs),
                  "--max-queue", str(args.clients)] + (["--model", args.model] if args.model else [])
    with serve(serve_args) as (_, url):
        report = asyncio.run(run(url, args))
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if report["completed_200"] == args.clients and not report["outputs_differing_from_alone"] else 1


if __name__ == "__main__":
    sys.exit(main())
