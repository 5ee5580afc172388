"""Run an app on a free loopback port in a thread, for tests and the load/fault scripts."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import uvicorn


@contextmanager
def serve_in_thread(app, timeout_s: float = 20.0, **config):
    """Run ``app`` on 127.0.0.1 with a free port; yields the base URL; always stops the server."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
