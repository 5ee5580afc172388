"""How a request's choices run and how their outputs are written: the engine generations merged as they arrive
(:class:`Fanout`), one request's accumulated state (:class:`Run`), and the three response formats (chat
completions, completions, the Responses API), each as one JSON body or an SSE stream of chunks or events."""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from dataclasses import dataclass, field

from fastapi import Request
from pydantic import BaseModel

from foretell import __version__
from foretell.engine.api import RequestOutput, RequestStats
from foretell.engine.detok import TokenTexts
from foretell.server import protocol as P
from foretell.server import responses as R
from foretell.server.errors import APIError
from foretell.server.provenance import ProvenanceTape
from foretell.server.tools import Parsed, StreamFilter, ToolChoice
from foretell.server.tools import parse as parse_tool_calls

FINGERPRINT = f"fp_foretell_{__version__}"
DISCONNECT_POLL_S = 0.5


def sse_data(obj) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False, allow_nan=False)}\n\n"


def per_source(stats: list[RequestStats]) -> dict[str, dict[str, int]]:
    """Draft tokens proposed/accepted per source, summed over choices."""
    out: dict[str, dict[str, int]] = {}
    for s in stats:
        for source, counts in s.sources.items():
            entry = out.setdefault(source, {"proposed": 0, "accepted": 0})
            entry["proposed"] += counts.proposed
            entry["accepted"] += counts.accepted
    return out


# -- choices and their merged outputs -------------------------------------------------------------
class ClientGone(Exception):
    pass


class Fanout:
    """One engine generation per choice, merged in arrival order. ``cancel`` stops them all (the engine
    aborts each request and frees its KV when its iterator is cancelled)."""

    def __init__(self, engine, requests):
        self._queue: asyncio.Queue = asyncio.Queue()
        self._live = len(requests)
        self._tasks = [asyncio.create_task(self._pump(i, engine, r)) for i, r in enumerate(requests)]

    async def _pump(self, i: int, engine, req) -> None:
        try:
            async for out in engine.generate(req):
                self._queue.put_nowait((i, out))
            self._queue.put_nowait((i, None))
        except Exception as exc:  # handed to the consumer, which maps it to a status
            self._queue.put_nowait((i, exc))

    async def next(self) -> tuple[int, RequestOutput] | None:
        """The next output of any choice; None once every choice finished; raises a choice's error."""
        while self._live:
            i, item = await self._queue.get()
            if item is None:
                self._live -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                return i, item
        return None

    def cancel(self) -> None:
        for t in self._tasks:
            t.cancel()


async def until_disconnect(request: Request, coro):
    """Await ``coro`` unless the client disconnects first (then cancel it and raise ClientGone)."""
    task = asyncio.ensure_future(coro)
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if not task.done() and await request.is_disconnected():
                raise ClientGone()
        return task.result()
    finally:
        if not task.done():
            task.cancel()


@dataclass
class ChoiceState:
    text: list[str] = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    text_offset: int = 0
    finish_reason: str | None = None
    stats: RequestStats | None = None


def finite(x: float) -> float:
    return x if math.isfinite(x) else -9999.0


class Run:
    """Accumulates one HTTP request's choices; knows its format (chat or completion) and timing."""

    def __init__(
        self, app_state, fmt: "ChatFormat | CompletionFormat", plan: P.Plan, include_usage: bool, provenance: bool = False
    ):
        self.state = app_state
        self.fmt = fmt
        self.plan = plan
        self.include_usage = include_usage
        self.choices = [ChoiceState() for _ in plan.requests]
        # opt-in stream extension (stream_options.include_provenance): one provenance tape per choice
        self.tapes = [ProvenanceTape(app_state.engine.tokenizer) for _ in plan.requests] if provenance else None
        self.id = fmt.prefix + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = app_state.engine.model_name
        self.started = time.perf_counter()
        self.first_token_at: float | None = None
        self.finished = False

    def arrived(self, out: RequestOutput) -> None:
        """Note an output's arrival (the first one with tokens sets the time to first token)."""
        if out.new_token_ids and self.first_token_at is None:
            self.first_token_at = time.perf_counter()

    def absorb(self, i: int, out: RequestOutput) -> tuple[str, list]:
        """Fold one engine output into choice ``i``; returns its text delta and formatted logprobs."""
        if out.finish_reason == "abort":
            raise APIError(503, "the engine aborted the request", code="aborted")
        self.arrived(out)
        c = self.choices[i]
        c.text.append(out.new_text)
        lps = self.fmt.logprobs(self, c, out) if out.new_logprobs is not None else []
        c.logprobs.extend(lps)
        c.stats = out.stats
        if out.finished:
            c.finish_reason = out.finish_reason or "stop"
        return out.new_text, lps

    def token_texts(self) -> TokenTexts:
        return self.state.token_texts

    def usage(self) -> P.Usage:
        stats = [c.stats or RequestStats() for c in self.choices]
        first_of_prompt = {}
        for i, p in enumerate(self.plan.prompt_index):
            first_of_prompt.setdefault(p, i)
        prompt = sum(self.plan.prompt_lens)
        completion = sum(s.completion_tokens for s in stats)
        return P.Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            prompt_tokens_details=P.PromptTokensDetails(cached_tokens=sum(stats[i].cached_tokens for i in first_of_prompt.values())),
            completion_tokens_details=P.CompletionTokensDetails(
                accepted_prediction_tokens=sum(s.accepted_prediction_tokens for s in stats),
                rejected_prediction_tokens=sum(s.rejected_prediction_tokens for s in stats),
            ),
        )

    def foretell_stats(self) -> P.ForetellStats:
        stats = [c.stats or RequestStats() for c in self.choices]
        return P.ForetellStats(
            forward_passes=sum(s.forward_passes for s in stats),
            prefill_passes=sum(s.prefill_passes for s in stats),
            draft_tokens_proposed=sum(s.draft_tokens_proposed for s in stats),
            draft_tokens_accepted=sum(s.draft_tokens_accepted for s in stats),
            sources=per_source(stats),
            cascade_drafter_tokens=sum(s.cascade_drafter_tokens for s in stats),
            queue_s=max(s.queue_s for s in stats),
            ttft_s=max(s.ttft_s for s in stats),
            decode_s=max(s.decode_s for s in stats),
        )

    def finish(self) -> None:
        """Record this request in the metrics (once, whatever the outcome)."""
        if self.finished:
            return
        self.finished = True
        m = self.state.metrics  # ServerMetrics
        now = time.perf_counter()
        m.latency.observe(now - self.started)
        if self.first_token_at is not None:
            m.ttft.observe(self.first_token_at - self.started)
        m.record(self.usage(), [c.stats or RequestStats() for c in self.choices])


# -- formats --------------------------------------------------------------------------------------
class _Format:
    """What the chat and completions formats share: SSE data lines, the closing usage chunk and ``[DONE]``."""

    def usage_chunk(self, run: Run) -> dict:
        chunk = self._chunk(run, [], usage=run.usage())
        chunk["foretell"] = run.foretell_stats().model_dump()
        return chunk

    def encode(self, obj: dict) -> str:
        return sse_data(obj)

    def closing(self, run: Run) -> list[str]:
        usage = [self.encode(self.usage_chunk(run))] if run.include_usage else []
        return usage + ["data: [DONE]\n\n"]

    def error_event(self, err: APIError) -> str:
        return self.encode(err.body())


class ChatFormat(_Format):
    prefix = "chatcmpl-"

    def __init__(self, tools: ToolChoice | None = None):
        self.tools = tools if tools is not None and tools.active else None
        self.filters: dict[int, StreamFilter] = {}  # per streamed choice, with tools

    def logprobs(self, run: Run, c: ChoiceState, out: RequestOutput) -> list[P.TokenLogprobOut]:
        texts = run.token_texts()
        items = []
        for lp in out.new_logprobs:
            tok, raw = texts.get(lp.token_id)
            top = [P.TopLogprob(token=texts.text(t), logprob=finite(v), bytes=texts.get(t)[1]) for t, v in lp.top]
            items.append(P.TokenLogprobOut(token=tok, logprob=finite(lp.logprob), bytes=raw, top_logprobs=top))
        return items

    def _chunk(self, run: Run, choices: list[P.ChatChunkChoice], usage: P.Usage | None = None) -> dict:
        chunk = P.ChatCompletionChunk(
            id=run.id, created=run.created, model=run.model, system_fingerprint=FINGERPRINT, choices=choices, usage=usage
        )
        return chunk.model_dump(exclude={"foretell"})

    def opening(self, run: Run) -> list[dict]:
        return [
            self._chunk(run, [P.ChatChunkChoice(index=i, delta={"role": "assistant", "content": ""})])
            for i in range(len(run.choices))
        ]

    def _filtered(self, run: Run, i: int, text: str, out: RequestOutput) -> tuple[str, list[dict] | None]:
        """Choice ``i``'s text delta, less what may be a tool call (with tools), and at its end its calls."""
        if self.tools is None:
            return text, None
        tool_filter = self.filters.setdefault(i, StreamFilter(self.tools))
        text, calls = tool_filter.feed(text), None
        if out.finished:
            rest, parsed = tool_filter.finish()
            text += rest
            calls = self._calls(run, i, parsed)
        return text, calls

    def delta(self, run: Run, i: int, text: str, lps: list, out: RequestOutput) -> list[dict]:
        chunks = []
        text, calls = self._filtered(run, i, text, out)
        if text or lps:
            logprobs = P.ChoiceLogprobs(content=lps) if out.new_logprobs is not None else None
            chunks.append(self._chunk(run, [P.ChatChunkChoice(index=i, delta={"content": text}, logprobs=logprobs)]))
        if calls:
            chunks.append(self._chunk(run, [P.ChatChunkChoice(index=i, delta={"tool_calls": calls})]))
        if out.finished:
            chunks.append(self._chunk(run, [P.ChatChunkChoice(index=i, delta={}, finish_reason=run.choices[i].finish_reason)]))
        return chunks

    @staticmethod
    def _calls(run: Run, i: int, parsed: Parsed | None) -> list[dict] | None:
        """The parsed calls of choice ``i`` (its finish reason becomes "tool_calls"), or None."""
        if parsed is None:
            return None
        run.choices[i].finish_reason = "tool_calls"
        return parsed.calls

    def _message(self, run: Run, i: int) -> P.ChatMessageOut:
        text = "".join(run.choices[i].text)
        parsed = parse_tool_calls(self.tools.opening() + text, self.tools) if self.tools is not None else None
        calls = self._calls(run, i, parsed)
        if calls is None:
            return P.ChatMessageOut(content=text)
        return P.ChatMessageOut(content=parsed.content, tool_calls=[
            P.ToolCallOut(id=c["id"], function=P.FunctionCallOut(**c["function"])) for c in calls])

    def response(self, run: Run, with_logprobs: bool) -> BaseModel:
        messages = [self._message(run, i) for i in range(len(run.choices))]
        choices = [
            P.ChatChoice(
                index=i,
                message=messages[i],
                logprobs=P.ChoiceLogprobs(content=c.logprobs) if with_logprobs else None,
                finish_reason=c.finish_reason or "stop",
            )
            for i, c in enumerate(run.choices)
        ]
        return P.ChatCompletion(
            id=run.id, created=run.created, model=run.model, system_fingerprint=FINGERPRINT,
            choices=choices, usage=run.usage(), foretell=run.foretell_stats(),
        )


class CompletionFormat(_Format):
    prefix = "cmpl-"

    def __init__(self, echo: list[str] | None = None, prompt_logprobs: list[list[tuple]] | None = None):
        self.echo = echo  # per prompt, its text to put before each of its choices' completions (``echo``)
        self.prompt_logprobs = prompt_logprobs  # per prompt, with echo and logprobs: its tokens' items (see _scored)

    def _echoed(self, run: Run, i: int) -> str:
        return self.echo[run.plan.prompt_index[i]] if self.echo is not None else ""

    def _prompt_items(self, run: Run, i: int) -> list[tuple]:
        return self.prompt_logprobs[run.plan.prompt_index[i]] if self.prompt_logprobs is not None else []

    def logprobs(self, run: Run, c: ChoiceState, out: RequestOutput) -> list[tuple]:
        texts = run.token_texts()
        items = []
        if self.echo is not None and not c.logprobs and not c.text_offset:  # offsets run on from the echoed prompt
            c.text_offset = len(self._echoed(run, next(j for j, x in enumerate(run.choices) if x is c)))
        pieces = out.token_texts or [""] * len(out.new_logprobs)
        for lp, piece in zip(out.new_logprobs, pieces):
            top = {texts.text(t): finite(v) for t, v in lp.top}
            items.append((texts.text(lp.token_id), finite(lp.logprob), top, c.text_offset))
            c.text_offset += len(piece)  # what the token added to the text (0 mid-character)
        return items

    @staticmethod
    def _logprobs_obj(items: list[tuple]) -> P.CompletionLogprobs:
        return P.CompletionLogprobs(
            tokens=[t[0] for t in items],
            token_logprobs=[t[1] for t in items],
            top_logprobs=[t[2] for t in items],
            text_offset=[t[3] for t in items],
        )

    def _chunk(self, run: Run, choices: list[P.CompletionChoice], usage: P.Usage | None = None) -> dict:
        chunk = P.Completion(
            id=run.id, created=run.created, model=run.model, system_fingerprint=FINGERPRINT, choices=choices, usage=usage
        )
        return chunk.model_dump(exclude={"foretell"})

    def opening(self, run: Run) -> list[dict]:
        return [self._chunk(run, [P.CompletionChoice(index=i, text=self._echoed(run, i), logprobs=self._prompt_obj(run, i),
                                                     finish_reason=None)])
                for i in range(len(run.choices)) if self._echoed(run, i)]

    def _prompt_obj(self, run: Run, i: int) -> P.CompletionLogprobs | None:
        return self._logprobs_obj(self._prompt_items(run, i)) if self.prompt_logprobs is not None else None

    def echo_only(self, run: Run) -> list[dict]:
        """``max_tokens: 0`` streamed: each choice's echoed prompt (and its logprobs), finished."""
        return [self._chunk(run, [P.CompletionChoice(index=i, text=self._echoed(run, i), logprobs=self._prompt_obj(run, i),
                                                     finish_reason="length")]) for i in range(len(run.choices))]

    def delta(self, run: Run, i: int, text: str, lps: list, out: RequestOutput) -> list[dict]:
        if not (text or lps or out.finished):
            return []
        logprobs = self._logprobs_obj(lps) if out.new_logprobs is not None else None
        reason = run.choices[i].finish_reason if out.finished else None
        return [self._chunk(run, [P.CompletionChoice(index=i, text=text, logprobs=logprobs, finish_reason=reason)])]

    def response(self, run: Run, with_logprobs: bool) -> BaseModel:
        choices = [
            P.CompletionChoice(
                index=i,
                text=self._echoed(run, i) + "".join(c.text),
                logprobs=self._logprobs_obj(self._prompt_items(run, i) + c.logprobs) if with_logprobs else None,
                finish_reason=c.finish_reason or "stop",
            )
            for i, c in enumerate(run.choices)
        ]
        return P.Completion(
            id=run.id, created=run.created, model=run.model, system_fingerprint=FINGERPRINT,
            choices=choices, usage=run.usage(), foretell=run.foretell_stats(),
        )


class ResponsesFormat(ChatFormat):
    """/v1/responses: the one choice as a Response object, or as its stream of typed events (``response.created``,
    the message's text deltas, each tool call's item, then ``response.completed`` or ``response.incomplete``).
    The reply is kept in the response store unless the request said ``store: false``."""

    prefix = "resp_"

    def __init__(self, req: R.ResponsesRequest, tools: ToolChoice | None, store: R.ResponseStore,
                 conversation: list[P.Message]):
        super().__init__(tools)
        self.req = req
        self.store = store
        self.conversation = conversation  # without the instructions: what a later turn continues
        self.sequence = 0
        self.message_id = R.new_id("msg_")
        self.opened = False  # streaming: the message item was announced
        self.streamed: list[str] = []
        self.streamed_logprobs: list[dict] = []

    def encode(self, obj: dict) -> str:
        event = {"type": obj.pop("type"), "sequence_number": self.sequence, **obj}
        self.sequence += 1
        return f"event: {event['type']}\n{sse_data(event)}"

    def closing(self, run: Run) -> list[str]:
        return []

    def error_event(self, err: APIError) -> str:
        e = err.body()["error"]
        return self.encode({"type": "error", "code": e["code"], "message": e["message"], "param": e["param"]})

    def _object(self, run: Run, status: str, output: list[dict], usage: dict | None = None, stats=None) -> dict:
        return R.response_object(self.req, run.id, run.created, run.model, status, output, usage, stats)

    def opening(self, run: Run) -> list[dict]:
        return [{"type": kind, "response": self._object(run, "in_progress", [])}
                for kind in ("response.created", "response.in_progress")]

    def _where(self, **more) -> dict:
        return {"item_id": self.message_id, "output_index": 0, "content_index": 0, **more}

    def _open(self) -> list[dict]:
        self.opened = True
        item = {"type": "message", "id": self.message_id, "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        return [{"type": "response.output_item.added", "output_index": 0, "item": item},
                {"type": "response.content_part.added", **self._where(part=part)}]

    def delta(self, run: Run, i: int, text: str, lps: list, out: RequestOutput) -> list[dict]:
        events = []
        text, calls = self._filtered(run, i, text, out)
        if text or lps:
            events += [] if self.opened else self._open()
            logprobs = [lp.model_dump() for lp in lps]
            self.streamed.append(text)
            self.streamed_logprobs += logprobs
            events.append({"type": "response.output_text.delta", **self._where(delta=text, logprobs=logprobs)})
        if out.finished:
            events += self._close(run, calls or [])
        return events

    def _close(self, run: Run, calls: list[dict]) -> list[dict]:
        events, items = [], []
        if not self.opened and not calls:
            events += self._open()
        if self.opened:
            text = "".join(self.streamed)
            logprobs = self.streamed_logprobs if self.req.wants_logprobs else None
            item = R.message_item(self.message_id, text, logprobs, self._status(run))
            events += [{"type": "response.output_text.done", **self._where(text=text, logprobs=logprobs or [])},
                       {"type": "response.content_part.done", **self._where(part=item["content"][0])},
                       {"type": "response.output_item.done", "output_index": 0, "item": item}]
            items.append(item)
        for call in calls:
            at, item = len(items), R.call_item(call)
            where = {"item_id": item["id"], "output_index": at}
            events += [{"type": "response.output_item.added", "output_index": at, "item": R.call_item(call, "in_progress", "")},
                       {"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]},
                       {"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"],
                        "name": item["name"]},
                       {"type": "response.output_item.done", "output_index": at, "item": item}]
            items.append(item)
        text = "".join(self.streamed) if self.opened else None
        final = self._finish(run, items, text, calls)
        events.append({"type": f"response.{final['status']}", "response": final})
        return events

    def _calls(self, run: Run, i: int, parsed: Parsed | None) -> list[dict] | None:
        """The chat format's calls, at most ``max_tool_calls`` of them."""
        calls = ChatFormat._calls(run, i, parsed)
        return calls[: self.req.max_tool_calls] if calls and self.req.max_tool_calls else calls

    @staticmethod
    def _status(run: Run) -> str:
        return "incomplete" if run.choices[0].finish_reason == "length" else "completed"

    def _finish(self, run: Run, items: list[dict], text: str | None, calls: list[dict]) -> dict:
        """The Response object at the end (kept in the store unless ``store: false``)."""
        usage = R.usage_object(run.usage())
        final = self._object(run, self._status(run), items, usage, run.foretell_stats().model_dump())
        if self.req.store is not False:
            self.store.put(R.Stored(final, [*self.conversation, R.assistant_message(text, calls)],
                                    R.input_items(self.req.input)))
        return final

    def response(self, run: Run, with_logprobs: bool) -> dict:
        text = "".join(run.choices[0].text)
        parsed = parse_tool_calls(self.tools.opening() + text, self.tools) if self.tools is not None else None
        calls = self._calls(run, 0, parsed) or []
        content = parsed.content if parsed is not None else text
        items = []
        if content is not None or not calls:
            logprobs = [lp.model_dump() for lp in run.choices[0].logprobs] if with_logprobs else None
            items.append(R.message_item(self.message_id, content or "", logprobs, self._status(run)))
        items += [R.call_item(c) for c in calls]
        return self._finish(run, items, content, calls)
