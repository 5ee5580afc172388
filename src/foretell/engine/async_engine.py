"""Asyncio front of the engine: a background thread runs ``LLMEngine.step()``; callers await outputs.

Callers never touch the engine while a step runs: requests and aborts go through an inbox that the step
thread drains between steps, and outputs come back through per-request asyncio queues.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import AsyncIterator

from foretell.config import EngineConfig
from foretell.engine.api import GenerationRequest, QueueFullError, RequestOutput
from foretell.engine.llm_engine import LLMEngine


class AsyncEngine:
    def __init__(self, engine: LLMEngine, model_name: str):
        self.engine = engine
        self.model_name = model_name
        self._inbox: deque[tuple[str, object]] = deque()
        self._queues: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._wakeup = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="foretell-engine", daemon=True)
        self._thread.start()

    @classmethod
    def from_config(cls, config: EngineConfig) -> "AsyncEngine":
        engine, name = LLMEngine.from_config(config)
        return cls(engine, name)

    @classmethod
    def from_model(cls, model, tokenizer, config: EngineConfig, model_name: str) -> "AsyncEngine":
        return cls(LLMEngine(model, tokenizer, config), model_name)

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    @property
    def config(self) -> EngineConfig:
        return self.engine.config

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    def validate(self, req: GenerationRequest) -> None:
        self.engine.validate(req)

    async def generate(self, req: GenerationRequest) -> AsyncIterator[RequestOutput]:
        """Yield the request's outputs as steps produce them; stopping early aborts it and frees its KV."""
        self.engine.validate(req)
        cfg = self.engine.config
        if len(self._queues) >= cfg.max_num_seqs + cfg.max_queue:
            raise QueueFullError(f"server busy: {len(self._queues)} requests in flight")
        queue: asyncio.Queue = asyncio.Queue()
        self._queues[req.request_id] = (asyncio.get_running_loop(), queue)
        self._send("add", req)
        finished = False
        try:
            while not finished:
                item = await queue.get()
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                finished = item.finished
                yield item
        finally:
            self._queues.pop(req.request_id, None)
            if not finished:
                self._send("abort", req.request_id)

    def metrics(self) -> dict:
        e = self.engine
        return {
            "queue_depth": len(e.waiting),
            "running": len(e.running),
            "kv_tokens_used": e.pool.used_tokens,
            "kv_tokens_total": e.pool.budget_tokens,
            "forward_passes": e.forward_passes,
        }

    def shutdown(self) -> None:
        self._stopping = True
        self._wakeup.set()
        self._thread.join(timeout=10)

    # -- the step thread --------------------------------------------------------------------------
    def _send(self, kind: str, payload) -> None:
        self._inbox.append((kind, payload))
        self._wakeup.set()

    def _deliver(self, request_id: str, item) -> None:
        target = self._queues.get(request_id)
        if target is not None:
            loop, queue = target
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def _drain_inbox(self) -> None:
        while self._inbox:
            kind, payload = self._inbox.popleft()
            if kind == "abort":
                self.engine.abort(payload)
                continue
            try:
                self.engine.add_request(payload)
            except Exception as exc:  # queue full or invalid: the caller gets the error
                self._deliver(payload.request_id, exc)

    def _run(self) -> None:
        while not self._stopping:
            self._drain_inbox()
            if not self.engine.has_unfinished():
                self._wakeup.wait(timeout=0.5)
                self._wakeup.clear()
                continue
            try:
                outputs = self.engine.step()
            except Exception as exc:  # an engine bug: fail the requests in flight, keep serving
                for seq in list(self.engine.running) + list(self.engine.waiting):
                    self.engine.abort(seq.id)
                    self._deliver(seq.id, exc)
                continue
            for out in outputs:
                self._deliver(out.request_id, out)
