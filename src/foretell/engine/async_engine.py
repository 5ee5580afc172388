"""Asyncio front of the engine: a background thread runs ``LLMEngine.step()``; callers await outputs.

Callers never touch the engine while a step runs: requests and aborts go through an inbox that the step
thread drains between steps, outputs come back through per-request asyncio queues, and the gauges that
``metrics()`` reports are a snapshot the step thread publishes under a lock after every step (reading the
engine's queues and KV pool from another thread while a step changes them is a race).

A request that fails inside the engine fails alone: its iterator raises the engine's
:class:`RequestFailedError` and the loop goes on with the others.

The step thread also builds the engine (:meth:`AsyncEngine.built`, which ``from_config`` and ``from_model`` use):
every parallel region of torch and of foretell's kernels then runs in that one thread. OpenMP keeps a pool of
worker threads per thread that starts parallel regions; with the model loaded in the main thread and the steps
run in this one, the process held two pools, more OpenMP threads than cores, and libgomp then makes idle workers
sleep at once instead of spinning between regions. Every layer's handful of regions then paid a wake-up: a
one-token step of the 0.5B after a 1,444-token prompt took 27-29 ms in the server against 17.5-18 ms when one
thread loaded and stepped (2-core AMD EPYC Zen 4).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from typing import AsyncIterator, Callable

from foretell.config import EngineConfig
from foretell.engine.api import GenerationRequest, QueueFullError, RequestFailedError, RequestOutput
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.memory import release_free_memory

log = logging.getLogger("foretell.engine")


class AsyncEngine:
    def __init__(self, engine: LLMEngine, model_name: str):
        """Serve an engine built already (its passes then run in two threads: prefer :meth:`built`)."""
        self._start(lambda: (engine, model_name))

    @classmethod
    def built(cls, build: Callable[[], tuple[LLMEngine, str]]) -> "AsyncEngine":
        """Serve the engine that ``build`` returns with its model name, built in the step thread (see the module
        docstring); what ``build`` raises is raised here."""
        self = cls.__new__(cls)
        self._start(build)
        return self

    @classmethod
    def from_config(cls, config: EngineConfig) -> "AsyncEngine":
        return cls.built(lambda: LLMEngine.from_config(config))

    @classmethod
    def from_model(cls, model, tokenizer, config: EngineConfig, model_name: str) -> "AsyncEngine":
        return cls.built(lambda: (LLMEngine(model, tokenizer, config), model_name))

    def _start(self, build: Callable[[], tuple[LLMEngine, str]]) -> None:
        self._inbox: deque[tuple[str, object]] = deque()
        self._queues: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._wakeup = threading.Event()
        self._stopping = False
        self._lock = threading.Lock()
        self._busy = False  # work was done since the engine last went idle
        ready, failure = threading.Event(), []
        self._thread = threading.Thread(target=self._main, args=(build, ready, failure), name="foretell-engine",
                                        daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    @property
    def config(self) -> EngineConfig:
        return self.engine.config

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    @property
    def speculation_methods(self) -> tuple[str, ...]:
        return self.engine.speculation_methods

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
        """The engine's gauges as of the last step (never read from the engine while it steps)."""
        with self._lock:
            return dict(self._gauges)

    def _read_gauges(self) -> dict:
        e = self.engine
        return {
            "queue_depth": len(e.waiting),
            "running": len(e.running),
            "kv_tokens_used": e.pool.used_tokens,
            "kv_tokens_reserved": e.pool.reserved_tokens,
            "kv_tokens_cached": e.pool.cached_tokens,
            "kv_tokens_total": e.pool.budget_tokens,
            "forward_passes": e.forward_passes,
        }

    def _publish_gauges(self) -> None:
        gauges = self._read_gauges()
        with self._lock:
            self._gauges = gauges

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

    def _main(self, build: Callable[[], tuple[LLMEngine, str]], ready: threading.Event, failure: list) -> None:
        try:
            self.engine, self.model_name = build()
            self._gauges = self._read_gauges()
        except BaseException as exc:  # the caller raises it
            failure.append(exc)
            return
        finally:
            ready.set()
        self._run()

    def _run(self) -> None:
        while not self._stopping:
            self._drain_inbox()
            self._publish_gauges()
            if not self.engine.has_unfinished():
                if self._busy:  # just ran out of work: give the memory freed by finished requests back
                    self._busy = False
                    release_free_memory()
                self._wakeup.wait(timeout=0.5)
                self._wakeup.clear()
                continue
            self._busy = True
            try:
                outputs = self.engine.step()
            except Exception:  # a bug outside any one request's work: fail those in flight, keep serving
                log.exception("engine step failed; failing the requests in flight")
                error = RequestFailedError("internal error in the engine")
                for seq in list(self.engine.running) + list(self.engine.waiting):
                    self.engine.abort(seq.id)
                    self._deliver(seq.id, error)
                continue
            self._publish_gauges()  # before the outputs: a client that sees its finish sees its KV freed
            for out in outputs:
                self._deliver(out.request_id, out.error if out.error is not None else out)
