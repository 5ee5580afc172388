"""Start ``foretell serve`` as a subprocess for the load and fault scripts, and read its process facts."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import httpx


@contextmanager
def serve(args: list[str], timeout_s: float = 600.0):
    """Run ``foretell serve --port 0 ARGS``; yields (process, base URL); always stops it."""
    cmd = [sys.executable, "-m", "foretell.cli", "serve", "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout], daemon=True).start()
    try:
        deadline, url = time.monotonic() + timeout_s, None
        while url is None:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the server did not start (exit code {proc.poll()})")
            try:
                m = re.search(r"serving .* on (http://127\.0\.0\.1:\d+)", lines.get(timeout=0.5))
                url = m.group(1) if m else None
            except queue.Empty:
                pass
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def gauges(url: str) -> dict[str, float]:
    """foretell_* gauges from /metrics."""
    text = httpx.get(url + "/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        m = re.match(r"foretell_(queue_depth|running|kv_tokens_used|kv_tokens_total|kv_tokens_reserved|kv_tokens_cached) ([0-9.e+]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


async def stream_chat(client: httpx.AsyncClient, url: str, body: dict) -> dict:
    """One streaming chat request: status, text, error events, usage, TTFT and latency."""
    start = time.perf_counter()
    result = {"status": None, "text": "", "errors": [], "usage": None, "ttft_s": None, "latency_s": None}
    async with client.stream("POST", url + "/v1/chat/completions", json={**body, "stream": True,
                             "stream_options": {"include_usage": True}}) as r:
        result["status"] = r.status_code
        async for line in r.aiter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            if "error" in event:
                result["errors"].append(event["error"])
                continue
            for c in event.get("choices", []):
                piece = c["delta"].get("content") or ""
                if piece and result["ttft_s"] is None:
                    result["ttft_s"] = time.perf_counter() - start
                result["text"] += piece
            if event.get("usage"):
                result["usage"] = event["usage"]
    result["latency_s"] = time.perf_counter() - start
    return result
