"""Faults on loopback: streams cancelled at random points, then a SIGTERM with streams in flight.

1. Baseline: warm-up requests (and ``--warmup-streams`` cancelled streams: the first packed batches of each
   size grow the process once — oneDNN keeps a primitive per GEMM shape, the allocator keeps its arenas — so
   a leak shows against the RSS after them, and the RSS before them is reported beside), then the KV gauge
   (/metrics) and the server's RSS.
2. ``--streams`` streaming requests (``--concurrency`` at a time), each closed by the client after a random
   number of chunks (0 = while it may still be queued). Then: nothing running or queued, KV and RSS back to
   the baseline, and a normal request still gets the same answer as before.
   (KV *reserved* must return to 0; the prefix cache keeps requests that finished before their client left,
   bounded by the KV budget, so ``kv_tokens_cached`` is reported, not required to return.)
3. SIGTERM while ``--drain`` streams are in flight: each must finish (``[DONE]``) and the process must exit
   with status 0 within the shutdown timeout.

    flock /tmp/foretell-heavy.lock .venv/bin/python benchmarks/faults.py        # default model
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _server import gauges, rss_mb, serve, stream_chat  # noqa: E402

PROMPTS = ["Write a Python function that sums a list.", "Explain what a hash map is.",
           "Write a haiku about compilers.", "List three sorting algorithms and their complexity."]


def chat(i: int, max_tokens: int) -> dict:
    return {"model": "default", "temperature": 0, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": f"{PROMPTS[i % len(PROMPTS)]} (#{i})"}]}


async def cancelled_stream(client: httpx.AsyncClient, url: str, i: int, rng: random.Random, max_tokens: int) -> int:
    """Open a stream and close it after a random number of chunks, or (0) after a random fraction of a second,
    possibly before the response started (the request may still be queued); returns the chunks read."""
    stop_after, read = rng.choice([0, 0, 1, 2, 3, 5, 8, 13]), 0
    body = {**chat(i, max_tokens), "stream": True}
    if rng.random() < 0.5:
        body["prediction"] = {"type": "content", "content": "def total(xs):\n    return sum(xs)\n"}

    async def read_some():
        nonlocal read
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    read += 1
                if stop_after and read >= stop_after:
                    break

    try:
        await asyncio.wait_for(read_some(), timeout=rng.uniform(0.01, 0.5) if stop_after == 0 else None)
    except asyncio.TimeoutError:
        pass
    return read


async def cancel_many(url: str, streams: int, concurrency: int, max_tokens: int, seed: int = 1) -> dict:
    rng = random.Random(seed)
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=concurrency + 4)) as client:
        async def one(i):
            async with sem:
                return await cancelled_stream(client, url, i, rng, max_tokens)

        start = time.perf_counter()
        chunks = await asyncio.gather(*(one(i) for i in range(streams)))
    return {"streams": streams, "wall_s": round(time.perf_counter() - start, 1),
            "closed_before_first_chunk": sum(c == 0 for c in chunks)}


async def answer(url: str) -> str:
    async with httpx.AsyncClient(timeout=300) as client:
        r = await stream_chat(client, url, chat(0, 24))
    assert r["status"] == 200 and not r["errors"], r
    return r["text"]


def settle(url: str, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        g = gauges(url)
        if (g.get("running", 1) == 0 and g.get("queue_depth", 1) == 0) or time.monotonic() > deadline:
            return g
        time.sleep(0.5)


async def drain(url: str, proc, n: int, max_tokens: int) -> dict:
    async with httpx.AsyncClient(timeout=300) as client:
        bodies = [{**chat(i, max_tokens), "ignore_eos": True} for i in range(n)]
        tasks = [asyncio.create_task(stream_chat(client, url, b)) for b in bodies]
        for _ in range(50):  # until a stream is generating (bounded: a fast model may be done already)
            await asyncio.sleep(0.1)
            if (await asyncio.to_thread(gauges, url)).get("running", 0) >= 1:
                break
        sent = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        results = await asyncio.gather(*tasks, return_exceptions=True)
    code = await asyncio.to_thread(proc.wait, 120)
    finished = [r for r in results if isinstance(r, dict) and r["status"] == 200 and not r["errors"]
                and r["usage"] is not None]
    return {"streams_in_flight": n, "finished_after_sigterm": len(finished), "exit_code": code,
            "exit_s_after_sigterm": round(time.perf_counter() - sent, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--drain", type=int, default=4)
    p.add_argument("--rounds", type=int, default=1, help="repeat the cancellations, RSS after each (a leak grows)")
    p.add_argument("--warmup-streams", type=int, default=0,
                   help="cancelled streams before the baseline is taken (RSS before them is reported too)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    serve_args = ["--dtype", args.dtype, "--device", "cpu", "--max-queue", "256", "--shutdown-timeout", "60"]
    serve_args += ["--model", args.model] if args.model else []
    report = {}
    with serve(serve_args) as (proc, url):
        reference = asyncio.run(answer(url))
        asyncio.run(answer(url))
        report["rss_mb_before_warmup"] = round(rss_mb(proc.pid), 1)
        if args.warmup_streams:
            report["warmup"] = asyncio.run(cancel_many(url, args.warmup_streams, args.concurrency, args.max_tokens,
                                                       seed=2))
        base = settle(url)
        report["baseline"] = {k: base[k] for k in ("kv_tokens_reserved", "kv_tokens_cached")}
        report["baseline"]["rss_mb"] = round(rss_mb(proc.pid), 1)
        print("faults: baseline", report["baseline"], url, file=sys.stderr, flush=True)
        report["rss_mb_after_round"] = []
        for _ in range(args.rounds):
            report["cancelled"] = asyncio.run(cancel_many(url, args.streams, args.concurrency, args.max_tokens))
            settle(url)
            report["rss_mb_after_round"].append(round(rss_mb(proc.pid), 1))
            print("faults: cancelled", report["cancelled"], report["rss_mb_after_round"], file=sys.stderr, flush=True)
        after = settle(url)
        report["after"] = {k: after[k] for k in ("running", "queue_depth", "kv_tokens_reserved", "kv_tokens_cached")}
        report["after"]["rss_mb"] = round(rss_mb(proc.pid), 1)
        report["same_answer_after"] = asyncio.run(answer(url)) == reference
        report["sigterm"] = asyncio.run(drain(url, proc, args.drain, args.max_tokens))
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    ok = (report["after"]["kv_tokens_reserved"] == 0 and report["same_answer_after"]
          and report["sigterm"]["finished_after_sigterm"] == args.drain and report["sigterm"]["exit_code"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
