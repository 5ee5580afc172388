"""ASGI middleware for vLLM's OpenAI server (``--middleware foretell.integrations.vllm.middleware.PredictionMiddleware``).

Requests to ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/responses``: foretell's fields (``prediction``,
``prediction_search_length``, ``speculation``) are validated (a bad value gets a 400 in OpenAI's error shape
naming the field, before vLLM sees the request), the prediction is tokenised with the served model's
tokenizer and everything moves into ``vllm_xargs`` (:mod:`.request`).

Responses: the usage gets OpenAI's ``accepted_prediction_tokens`` / ``rejected_prediction_tokens`` and the
body a ``foretell`` stats block (:func:`.request.usage_details`); when streaming, the chunk that carries the
usage (``stream_options.include_usage``) is patched, as OpenAI puts usage in the last chunk; a Responses
API reply gets the counts in ``usage.output_tokens_details`` (streamed: in ``response.completed``). vLLM's
per-request speculative-decoding metrics (``--per-request-spec-decode-metrics summary``) feed both.

Tokenising (the prediction on the way in, each reply on the way out to count its accepted prediction tokens)
runs on one worker thread, not on vLLM's event loop: a 1,000-token prediction takes 1.5-2 ms, and concurrent
requests would otherwise wait on each other's before vLLM sees them. One thread keeps the tokenizer's calls
in order; the fast tokenizer's encoding releases the GIL.
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable

from foretell.integrations.vllm import adapter
from foretell.integrations.vllm.request import (
    SpecStats, matched_tokens, parse_fields, patch_usage, rewrite_body, usage_details,
)
from foretell.server.errors import APIError

log = logging.getLogger("foretell.vllm")
PATHS = {"/v1/chat/completions": "chat", "/v1/completions": "completion", "/v1/responses": "responses"}
Message = dict[str, Any]


class _Exchange:
    """What one request needs on the way back: the prediction's ids and the text of each choice;
    ``encode(text)`` awaits the served tokenizer's ids of a text."""

    def __init__(self, kind: str, prediction_ids: list[int], encode: Callable[[str], Awaitable[list[int]]]):
        self.kind, self.prediction_ids, self.encode = kind, prediction_ids, encode
        self.texts: dict[int, list[str]] = {}

    def add_choices(self, payload: dict[str, Any]) -> None:
        if self.kind == "responses":
            self._add_response_text(payload)
            return
        for choice in payload.get("choices") or ():
            part = choice.get("text") if self.kind == "completion" else \
                (choice.get("message") or choice.get("delta") or {}).get("content")
            if part:
                self.texts.setdefault(int(choice.get("index", 0)), []).append(part)

    def _add_response_text(self, payload: dict[str, Any]) -> None:
        """A Responses reply's text: its message items' ``output_text`` (a stream: the text deltas)."""
        if "type" in payload:  # a stream event (the closing one repeats the whole text)
            if payload["type"] == "response.output_text.delta" and payload.get("delta"):
                self.texts.setdefault(0, []).append(payload["delta"])
            return
        for item in payload.get("output") or ():
            for part in (item.get("content") or ()) if item.get("type") == "message" else ():
                if part.get("type") == "output_text" and part.get("text"):
                    self.texts.setdefault(0, []).append(part["text"])

    @staticmethod
    def usage_of(payload: dict[str, Any]) -> dict[str, Any] | None:
        """The payload's usage: a body's or a chunk's, or a Responses stream's ``response.completed`` object's."""
        usage = payload.get("usage")
        if usage is None and isinstance(payload.get("response"), dict):
            usage = payload["response"].get("usage")
        return usage if isinstance(usage, dict) else None

    async def patch(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` with prediction counts in its usage and the ``foretell`` block (if it has usage)."""
        usage = self.usage_of(payload)
        if usage is None:
            return payload
        matched = [matched_tokens(self.prediction_ids, await self._ids("".join(parts))) for parts in self.texts.values()]
        output_tokens = int(usage.get("completion_tokens", usage.get("output_tokens", 0)))
        details, stats = usage_details(len(self.prediction_ids), matched or [0], output_tokens,
                                       SpecStats.from_response(payload))
        if self.kind != "responses":
            out = {**payload, "usage": patch_usage(usage, details)}
        elif "usage" in payload:
            out = {**payload, "usage": patch_usage(usage, details, "output_tokens_details")}
        else:
            out = {**payload, "response": {**payload["response"], "usage": patch_usage(usage, details, "output_tokens_details")}}
        if stats is not None:
            out["foretell"] = stats
        return out

    async def _ids(self, text: str) -> list[int]:
        return await self.encode(text) if text and self.prediction_ids else []


class PredictionMiddleware:
    """Pure ASGI middleware (streaming bodies pass through event by event)."""

    def __init__(self, app: Callable[..., Awaitable[None]]):
        self.app = app
        self._tokenizer: Any = None
        self._worker: ThreadPoolExecutor | None = None  # the thread that tokenises (made on first use)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        kind = PATHS.get(scope.get("path", "")) if scope.get("type") == "http" else None
        if kind is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        raw = await _read_body(receive)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        if not isinstance(body, dict):  # vLLM answers malformed bodies itself
            await self.app(scope, _replay(raw, receive), send)
            return
        try:
            fields = parse_fields(body)
            tokenizer = self.tokenizer(scope)
        except APIError as exc:
            await _send_json(send, exc.status, exc.body())
            return

        async def encode(text: str) -> list[int]:
            return await self._off_loop(lambda: list(tokenizer.encode(text, add_special_tokens=False)))

        ids = await encode(fields.prediction) if fields.prediction else []
        new_raw = json.dumps(rewrite_body(body, fields, ids)).encode()
        exchange = _Exchange(kind, ids, encode)
        await self.app(_with_length(scope, len(new_raw)), _replay(new_raw, receive), _ResponsePatcher(send, exchange))

    async def _off_loop(self, work: Callable[[], Any]) -> Any:
        """``work()`` on the tokenising thread, awaited."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="foretell-tokenize")
        return await asyncio.get_running_loop().run_in_executor(self._worker, work)

    def tokenizer(self, scope: dict) -> Any:
        """The served model's tokenizer (loaded once, from the path in vLLM's config)."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            adapter.check_version()
            config = adapter.app_vllm_config(scope.get("app"))
            if config is None:
                raise APIError(503, "the server is starting", code="not_ready")
            self._tokenizer = AutoTokenizer.from_pretrained(adapter.tokenizer_path(config))
        return self._tokenizer


class _ResponsePatcher:
    """Wraps ``send``: a JSON body is buffered and patched; an event stream is patched event by event."""

    def __init__(self, send: Callable, exchange: _Exchange):
        self.send, self.exchange = send, exchange
        self.start: Message | None = None
        self.stream = False
        self.buffer = b""

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = {k.lower(): v for k, v in message.get("headers", [])}
            self.stream = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            if message.get("status", 200) != 200:
                self.exchange = None  # errors pass through untouched
            if self.stream or self.exchange is None:
                await self.send(message)
            else:
                self.start = message  # sent with the patched body's length
            return
        if message["type"] != "http.response.body":
            await self.send(message)
            return
        if self.exchange is None:
            await self.send(message)
        elif self.stream:
            await self._stream(message)
        else:
            await self._json(message)

    async def _json(self, message: Message) -> None:
        self.buffer += message.get("body", b"")
        if message.get("more_body"):
            return
        body = self.buffer
        try:
            payload = json.loads(body)
            self.exchange.add_choices(payload)
            body = json.dumps(await self.exchange.patch(payload)).encode()
        except Exception as exc:  # noqa: BLE001 - never lose vLLM's answer over a usage field
            log.warning("foretell: response left unpatched (%s)", exc)
        start = dict(self.start or {"type": "http.response.start", "status": 200, "headers": []})
        start["headers"] = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        start["headers"].append((b"content-length", str(len(body)).encode()))
        await self.send(start)
        await self.send({"type": "http.response.body", "body": body, "more_body": False})

    async def _stream(self, message: Message) -> None:
        self.buffer += message.get("body", b"")
        events, sep, rest = self.buffer.rpartition(b"\n\n")
        self.buffer = rest
        out = b"".join([await self._event(e) + b"\n\n" for e in events.split(b"\n\n")]) if sep else b""
        if not message.get("more_body"):
            out += self.buffer
            self.buffer = b""
        if out or not message.get("more_body"):
            await self.send({"type": "http.response.body", "body": out, "more_body": bool(message.get("more_body"))})

    async def _event(self, event: bytes) -> bytes:
        """One SSE event (its ``data:`` line patched; an ``event:`` line before it, as Responses streams have, kept)."""
        head, sep, data = event.rpartition(b"data: ")
        if not data or (head and not head.endswith(b"\n")) or data.strip() == b"[DONE]":
            return event
        try:
            payload = json.loads(data)
        except ValueError:
            return event
        if not isinstance(payload, dict):
            return event
        self.exchange.add_choices(payload)
        if self.exchange.usage_of(payload) is None:
            return event
        return head + sep + json.dumps(await self.exchange.patch(payload)).encode()


async def _read_body(receive: Callable) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Callable) -> Callable[[], Awaitable[Message]]:
    """``receive`` that hands over ``body`` once, then waits on the client's (for its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _with_length(scope: dict, length: int) -> dict:
    headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
    return {**scope, "headers": headers + [(b"content-length", str(length).encode())]}


async def _send_json(send: Callable, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
