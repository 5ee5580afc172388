"""Size limits through HTTP on the real engine (tiny model): oversize bodies get 413 without being read."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from foretell.config import EngineConfig
from foretell.engine.async_engine import AsyncEngine
from foretell.server import build_app
from foretell.testing import make_tiny_model, make_tiny_tokenizer
from foretell.testing.server import serve_in_thread

LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def server():
    cfg = EngineConfig(measure_cost_curve=False, max_prediction_tokens=256, kv_budget_tokens=4096)
    engine = AsyncEngine.from_model(make_tiny_model(), make_tiny_tokenizer(), cfg, "tiny")
    try:
        with serve_in_thread(build_app(engine, max_body_bytes=LIMIT)) as url:
            yield url
    finally:
        engine.shutdown()


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _status_and_body(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body[body.index(b"{"):])


def test_a_declared_50_mb_body_is_refused_before_it_is_sent(server):
    """Only the headers go out: the 413 must come back without the server waiting for (or reading) the body."""
    sock = _connect(server)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 52428800\r\n\r\n")
    status, body = _status_and_body(sock)
    sock.close()
    assert status == 413
    assert body["error"]["code"] == "request_too_large" and body["error"]["type"] == "invalid_request_error"


def test_a_chunked_body_is_cut_off_at_the_limit(server):
    """No Content-Length: the body is counted as it arrives and refused once past the limit, while the
    client is still sending (socket buffers on loopback hold a few MB, hence the generous bound)."""
    sock = _connect(server)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"[" * 8192
    sent, status = 0, None
    sock.setblocking(False)
    while sent < 64 * 2**20 and status is None:
        try:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            time.sleep(0.01)
        try:
            if sock.recv(1, socket.MSG_PEEK):
                status = 0
        except BlockingIOError:
            pass
    sock.setblocking(True)
    status, body = _status_and_body(sock)
    sock.close()
    assert status == 413 and body["error"]["code"] == "request_too_large"
    assert sent < 32 * 2**20


def test_a_body_under_the_limit_is_served_and_health_answers_meanwhile(server):
    text = "word " * 5000  # ~25 kB, under the limit; its prediction is far over 256 tokens
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
            "prediction": {"type": "content", "content": text}}
    r = httpx.post(server + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "prediction"
    assert r.json()["error"]["code"] == "prediction_too_long"
    body["prediction"]["content"] = "def add"
    assert httpx.post(server + "/v1/chat/completions", json=body, timeout=60).status_code == 200
    assert httpx.get(server + "/health", timeout=5).status_code == 200
