"""The OpenAI-compatible HTTP server: it translates protocol only; all generation logic is the engine's.

    request JSON → protocol models → GenerationRequest per choice → AsyncEngine.generate → chunks/response

Every choice of a request runs as its own engine request; their outputs are merged as they arrive. A client
that goes away (mid-stream, or while waiting) stops the engine iterators, which aborts the requests and frees
their KV. All state lives on ``app.state`` (engine, API key, metrics registry, stored responses). How the choices'
outputs become chunks, events and bodies is :mod:`foretell.server.formats`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Callable, Literal, Sequence

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from pydantic import BaseModel, ValidationError

from foretell import __version__
from foretell.config import SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest, RequestOutput, RequestStats
from foretell.server import protocol as P
from foretell.server import responses as R
from foretell.engine.detok import TokenTexts
from foretell.server.formats import (
    ChatFormat, ClientGone, CompletionFormat, Fanout, ResponsesFormat, Run, finite, per_source,
    until_disconnect,
)
from foretell.server.provenance import ProvenanceTape
from foretell.server.tools import ToolChoice
from foretell.server.errors import APIError, from_engine_error, from_validation_error, install_error_handlers
from foretell.server.limits import DEFAULT_MAX_BODY_BYTES, BodySizeLimit
from foretell.server.openapi import openapi_document

log = logging.getLogger("foretell.server")
MAX_CHOICES = 128
PARSE_INLINE_BYTES = 256 * 1024  # larger bodies are parsed off the event loop
STATIC_DIR = Path(__file__).parent / "static"  # the playground: plain HTML/CSS/JS, no build step
_ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/models", "/tokenize", "/detokenize",
              "/health", "/metrics")


# -- metrics --------------------------------------------------------------------------------------
class _EngineCollector:
    """Reads the engine's gauges at scrape time."""

    def __init__(self, engine):
        self.engine = engine

    def describe(self):
        return []

    def collect(self):
        m = self.engine.metrics()
        for key, doc in (
            ("queue_depth", "Requests waiting for a slot"),
            ("running", "Requests running"),
            ("kv_tokens_used", "KV cache tokens in use"),
            ("kv_tokens_reserved", "KV tokens reserved by running requests"),
            ("kv_tokens_cached", "KV tokens held by the prefix cache (finished requests)"),
            ("kv_tokens_total", "KV cache token budget"),
        ):
            yield GaugeMetricFamily(f"foretell_{key}", doc, value=float(m.get(key, 0)))
        if "forward_passes" in m:
            yield CounterMetricFamily("foretell_forward_passes", "Engine forward passes", value=float(m["forward_passes"]))


class ServerMetrics:
    """Prometheus metrics in a registry of this app's own (no process globals)."""

    def __init__(self, engine):
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.requests = Counter("foretell_requests", "HTTP requests", ["endpoint", "status"], registry=r)
        self.prompt_tokens = Counter("foretell_prompt_tokens", "Prompt tokens", registry=r)
        self.completion_tokens = Counter("foretell_completion_tokens", "Completion tokens", registry=r)
        self.accepted = Counter("foretell_prediction_tokens_accepted", "Accepted prediction tokens", registry=r)
        self.rejected = Counter("foretell_prediction_tokens_rejected", "Rejected prediction tokens", registry=r)
        self.seq_passes = Counter(
            "foretell_request_forward_passes", "Forward passes summed over requests (a batched pass counts once per request)", registry=r
        )
        buckets = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
        self.drafted = Counter("foretell_draft_tokens_proposed", "Draft tokens verified, by source", ["source"], registry=r)
        self.draft_accepted = Counter("foretell_draft_tokens_accepted", "Draft tokens accepted, by source", ["source"], registry=r)
        self.cascade_drafter = Counter(
            "foretell_cascade_drafter_tokens", "Cascade output tokens taken from the drafter's distribution", registry=r
        )
        self.ttft = Histogram("foretell_time_to_first_token_seconds", "Time to first token", buckets=buckets, registry=r)
        self.latency = Histogram("foretell_request_latency_seconds", "Request latency", buckets=buckets, registry=r)
        r.register(_EngineCollector(engine))

    def record(self, usage: P.Usage, stats: list[RequestStats]) -> None:
        self.prompt_tokens.inc(usage.prompt_tokens)
        self.completion_tokens.inc(usage.completion_tokens)
        self.accepted.inc(usage.completion_tokens_details.accepted_prediction_tokens)
        self.rejected.inc(usage.completion_tokens_details.rejected_prediction_tokens)
        self.seq_passes.inc(sum(s.forward_passes for s in stats))
        for source, counts in per_source(stats).items():
            self.drafted.labels(source=source).inc(counts["proposed"])
            self.draft_accepted.labels(source=source).inc(counts["accepted"])
        self.cascade_drafter.inc(sum(s.cascade_drafter_tokens for s in stats))


class _CountRequests:
    """Pure ASGI middleware counting responses by endpoint and status (streams untouched), and answering every
    request with an ``x-request-id`` header: the client's own (printable, up to 128 characters), else a new one (the
    official client keeps it as ``_request_id``)."""

    def __init__(self, app, metrics: ServerMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = [500]
        given = dict(scope.get("headers") or ()).get(b"x-request-id", b"")
        request_id = given if 0 < len(given) <= 128 and given.isascii() and given.decode().isprintable() \
            else ("req_" + uuid.uuid4().hex).encode()

        async def send_status(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, (b"x-request-id", request_id)]}
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            path = scope.get("path", "")
            endpoint = path if path in _ENDPOINTS else "other"
            self.metrics.requests.labels(endpoint=endpoint, status=str(status[0])).inc()


# -- auth -----------------------------------------------------------------------------------------
async def require_api_key(request: Request) -> None:
    key = request.app.state.api_key
    if key is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
        raise APIError(401, "invalid or missing API key: send 'Authorization: Bearer <key>'", code="invalid_api_key")


# -- the generation endpoints -----------------------------------------------------------------
def parse(model_cls: type[BaseModel], body: bytes, field_names: frozenset[str] = P.FIELD_NAMES):
    try:
        return model_cls.model_validate_json(body)
    except ValidationError as exc:
        raise from_validation_error(exc, field_names) from None


async def parse_body(request: Request, model_cls: type[BaseModel], field_names: frozenset[str] = P.FIELD_NAMES):
    """Read and validate the body; a large one is parsed in a worker thread so the event loop keeps
    serving other requests (/health, streams) meanwhile."""
    body = await request.body()
    if len(body) <= PARSE_INLINE_BYTES:
        return parse(model_cls, body, field_names)
    return await run_in_threadpool(parse, model_cls, body, field_names)


def check_model(engine, name: str) -> None:
    """The request's ``model`` must name the served model: its full name, "default", or the short name
    ``--model`` took for a packaged model (e.g. "qwen2.5-coder-1.5b" for "qwen2.5-coder-1.5b-instruct")."""
    from foretell.models.registry import find_packaged

    packaged = find_packaged(name) if name.strip() not in ("", "default") else None
    if name not in (engine.model_name, "default") and (packaged is None or packaged.name != engine.model_name):
        raise APIError(
            404, f"the model {name!r} does not exist; this server serves {engine.model_name!r}",
            param="model", code="model_not_found",
        )


@dataclass
class Translated:
    plan: P.Plan
    rename: dict[str, str]
    logprobs: int | None
    tools: ToolChoice | None = None
    prompts: list[list[int]] | None = None  # completions: the prompts' token ids


def translate_chat(engine, req: P.ChatCompletionRequest, header: str | None) -> Translated:
    P.check_supported_chat(req)
    tok = engine.tokenizer
    tools = P.tool_choice(req)
    if tools.opening() and P.json_schema_of(req.response_format) is not None:
        raise APIError(400, "response_format cannot be combined with a forced tool_choice (the call is not the schema's JSON)",
                       param="response_format")
    how = P.rendering(req)
    if how.continue_final_message and tools.opening():
        raise APIError(400, "continue_final_message cannot be combined with a forced tool_choice", param="continue_final_message")
    prompt = P.chat_prompt_ids(tok, req.messages, tools, how)
    max_field = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
    max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    logprobs = (req.top_logprobs or 0) if req.logprobs else None
    rename = {"prompt": "messages", "max_tokens": max_field, "search_length": "prediction_search_length"}
    plan = _plan(engine, req, [prompt], max_tokens, None, logprobs, header, rename)
    return Translated(plan, rename, logprobs, tools)


def translate_completion(engine, req: P.CompletionRequest, header: str | None) -> Translated:
    P.check_supported_completion(req)
    prompts = P.completion_prompts(engine.tokenizer, req.prompt)
    rename = {"messages": "prompt", "top_logprobs": "logprobs", "search_length": "prediction_search_length"}
    plan = _plan(engine, req, prompts, req.max_tokens, 16, req.logprobs, header, rename)
    return Translated(plan, rename, req.logprobs, prompts=prompts)


_SPECULATION_FIELDS = {f: f"speculation.{f}" for f in ("method", "rule", "alpha", "k_max")}


def _plan(engine, req, prompts, max_tokens, default, logprobs, header, rename) -> P.Plan:
    room = min(engine.max_model_len, engine.config.kv_budget_tokens)
    cap = default or room  # chat: up to the context; completions: OpenAI's 16

    def default_max(n_prompt: int) -> int:
        return max(1, min(cap, room - n_prompt))

    rename = {**_SPECULATION_FIELDS, **rename}
    most = min(MAX_CHOICES, engine.config.max_num_seqs + engine.config.max_queue)  # more could never run
    if len(prompts) * (req.n or 1) > most:
        raise APIError(400, f"at most {most} choices (prompts × n) per request on this server", param="n")
    try:
        spec = req.speculation or P.Speculation()
        speculation = SpeculationParams(
            prediction=P.prediction_ids(engine.tokenizer, req.prediction),
            search_length=P.search_length(req, header),
            method=spec.method,
            k_max=spec.k_max,
            rule=spec.rule,
            alpha=spec.alpha,
        )
        plan = P.plan_requests(req, prompts, max_tokens, default_max, logprobs, speculation)
        for r in plan.requests:
            engine.validate(r)
    except APIError:
        raise
    except Exception as exc:  # ConfigError / RequestTooLongError → 400; anything else is a bug → 500
        raise from_engine_error(exc, rename) from exc
    return plan


async def respond(request: Request, fmt, req, translated: Translated) -> Response:
    """Run the planned choices; answer one JSON response or an SSE stream. A client that leaves stops them."""
    state = request.app.state
    plan = translated.plan
    options = getattr(req, "stream_options", None)
    include_usage = bool(req.stream and options and options.include_usage)
    provenance = bool(req.stream and options and options.include_provenance)
    run = Run(state, fmt, plan, include_usage, provenance)
    fanout = Fanout(state.engine, plan.requests)
    try:
        if req.stream:
            first = await until_disconnect(request, _first_outputs(run, fanout))
            return _Stream(_sse(run, fanout, first), on_close=partial(_close, run, fanout))
        await until_disconnect(request, _drain(run, fanout))
        body = fmt.response(run, with_logprobs=translated.logprobs is not None)
        run.finish()
        text = body.model_dump_json() if isinstance(body, BaseModel) else json.dumps(body, ensure_ascii=False)
        return Response(text, media_type="application/json")
    except ClientGone:
        _close(run, fanout)
        return Response(status_code=499)
    except APIError:
        _close(run, fanout)
        raise
    except Exception as exc:  # the engine refused or failed the request
        _close(run, fanout)
        raise from_engine_error(exc, translated.rename) from exc


class _Stream(StreamingResponse):
    """An SSE response that always runs ``on_close`` (cancelling the choices), even when the client left
    before the body iterator ran to its end."""

    def __init__(self, body, on_close: Callable[[], object]):
        super().__init__(body, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        self.on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_close()


def _close(run: Run, fanout: Fanout) -> None:
    fanout.cancel()
    run.finish()


async def _first_outputs(run: Run, fanout: Fanout) -> list:
    """Wait until every choice produced an output (or finished), so errors like a full queue become an
    HTTP status before the stream starts."""
    events, seen = [], set()
    while len(seen) < len(run.choices):
        ev = await fanout.next()
        if ev is None:
            break
        run.arrived(ev[1])
        events.append(ev)
        seen.add(ev[0])
    return events


async def _drain(run: Run, fanout: Fanout) -> None:
    while (ev := await fanout.next()) is not None:
        run.absorb(*ev)


async def _sse(run: Run, fanout: Fanout, first: list):
    try:
        for chunk in run.fmt.opening(run):
            yield run.fmt.encode(chunk)
        for ev in first:
            for chunk in _chunks(run, ev):
                yield chunk
        while (ev := await fanout.next()) is not None:
            for chunk in _chunks(run, ev):
                yield chunk
        for line in run.fmt.closing(run):
            yield line
    except Exception as exc:  # mid-stream failure: OpenAI's error event, then stop
        err = exc if isinstance(exc, APIError) else from_engine_error(exc)
        log.warning("stream failed: %s", exc)
        yield run.fmt.error_event(err)
    finally:
        _close(run, fanout)


def _chunks(run: Run, ev) -> list[str]:
    i, out = ev
    text, lps = run.absorb(i, out)
    chunks = run.fmt.delta(run, i, text, lps, out)
    if run.tapes is not None:
        _add_provenance(run.tapes[i], out, text, chunks)
    return [run.fmt.encode(c) for c in chunks]


def _add_provenance(tape: ProvenanceTape, out: RequestOutput, text: str, chunks: list[dict]) -> None:
    """The provenance extension: each chunk of the choice gets ``choices[0].foretell`` with the spans of its
    text (the first chunk carries the text) and the choice's running token counts."""
    tape.add(out)
    spans = tape.spans(text)
    s = out.stats
    for j, chunk in enumerate(chunks):
        chunk["choices"][0]["foretell"] = {
            "spans": spans if j == 0 else [],
            "completion_tokens": s.completion_tokens,
            "accepted_prediction_tokens": s.accepted_prediction_tokens,
            "forward_passes": s.forward_passes,
        }


# -- routes ---------------------------------------------------------------------------------------
v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_api_key)])


@v1.post("/chat/completions")
async def chat_completions(request: Request) -> Response:
    engine = request.app.state.engine
    req = await parse_body(request, P.ChatCompletionRequest)
    check_model(engine, req.model)
    translated = translate_chat(engine, req, request.headers.get(P.SEARCH_LENGTH_HEADER))
    return await respond(request, ChatFormat(translated.tools), req, translated)


@v1.post("/completions")
async def completions(request: Request) -> Response:
    engine = request.app.state.engine
    req = await parse_body(request, P.CompletionRequest)
    check_model(engine, req.model)
    P.check_supported_completion(req)
    echo_only = req.max_tokens == 0  # the prompt alone (with echo: checked)
    plan_req = req.model_copy(update={"max_tokens": 1}) if echo_only else req
    translated = translate_completion(engine, plan_req, request.headers.get(P.SEARCH_LENGTH_HEADER))
    echo = P.prompt_texts(engine.tokenizer, req.prompt, translated.prompts) if req.echo else None
    scored = None
    if req.echo and req.logprobs is not None:
        scored = await _scored_prompts(request, translated, req.logprobs)
        if scored is None:
            return Response(status_code=499)
    fmt = CompletionFormat(echo, scored)
    if echo_only:
        return _echo_only(request, fmt, req, translated)
    return await respond(request, fmt, req, translated)


async def _scored_prompts(request: Request, translated: Translated, top: int) -> list[list[tuple]] | None:
    """``echo`` with ``logprobs``: each prompt's tokens as completion logprob items (the first token has none),
    from a request of its own that computes every prompt position (the choices' generation is not touched by
    it). None if the client left."""
    engine, texts = request.app.state.engine, request.app.state.token_texts

    async def score(ids: list[int]) -> list[tuple]:
        req = GenerationRequest(prompt_ids=ids, max_tokens=1, sampling=SamplingParams(temperature=0.0),
                                speculation=SpeculationParams(method="none"), prompt_logprobs=top)
        engine.validate(req)
        lps = []
        async for out in engine.generate(req):
            lps += out.prompt_logprobs or []
        items, offset = [(texts.text(ids[0]), None, None, 0)], len(texts.text(ids[0]))
        for lp in lps:
            items.append((texts.text(lp.token_id), finite(lp.logprob), {texts.text(t): finite(v) for t, v in lp.top},
                          offset))
            offset += len(texts.text(lp.token_id))
        return items

    try:
        return await until_disconnect(request, asyncio.gather(*(score(ids) for ids in translated.prompts)))
    except ClientGone:
        return None
    except APIError:
        raise
    except Exception as exc:  # the engine refused or failed the request
        raise from_engine_error(exc, translated.rename) from exc


def _echo_only(request: Request, fmt: CompletionFormat, req: P.CompletionRequest, translated: Translated) -> Response:
    """``max_tokens: 0``: every choice is its echoed prompt (scored with ``logprobs``), nothing generated."""
    options = req.stream_options
    run = Run(request.app.state, fmt, translated.plan, bool(req.stream and options and options.include_usage))
    for c in run.choices:
        c.finish_reason = "length"
    run.finish()
    if not req.stream:
        body = fmt.response(run, with_logprobs=req.logprobs is not None)
        return Response(body.model_dump_json(), media_type="application/json")
    lines = [fmt.encode(chunk) for chunk in fmt.echo_only(run)] + fmt.closing(run)
    return Response("".join(lines), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


@v1.post("/responses")
async def responses(request: Request) -> Response:
    state = request.app.state
    req = await parse_body(request, R.ResponsesRequest, R.FIELD_NAMES)
    check_model(state.engine, req.model)
    R.check_supported(req)
    history = state.responses.get(req.previous_response_id, "previous_response_id").conversation \
        if req.previous_response_id else []
    try:
        try:
            chat, conversation = R.to_chat(req, history)
        except ValidationError as exc:
            raise from_validation_error(exc, R.FIELD_NAMES) from None
        translated = translate_chat(state.engine, chat, request.headers.get(P.SEARCH_LENGTH_HEADER))
    except APIError as err:
        raise R.renamed(err) from None
    fmt = ResponsesFormat(req, translated.tools, state.responses, conversation)
    return await respond(request, fmt, chat, translated)


@v1.get("/responses/{response_id}")
async def get_response(request: Request, response_id: str) -> JSONResponse:
    return JSONResponse(request.app.state.responses.get(response_id).response)


@v1.get("/responses/{response_id}/input_items")
async def list_input_items(request: Request, response_id: str, after: str | None = None,
                           limit: Annotated[int, Query(ge=1, le=100)] = 20,
                           order: Literal["asc", "desc"] = "desc") -> JSONResponse:
    items = request.app.state.responses.get(response_id).input_items
    return JSONResponse(R.item_page(items, after, limit, order))


@v1.post("/responses/{response_id}/cancel")
async def cancel_response(request: Request, response_id: str) -> JSONResponse:
    request.app.state.responses.get(response_id)
    raise APIError(400, "only background responses can be cancelled, and this server runs none", param="response_id")


@v1.delete("/responses/{response_id}")
async def delete_response(request: Request, response_id: str) -> JSONResponse:
    request.app.state.responses.delete(response_id)
    return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})


def _model_card(request: Request) -> P.ModelCard:
    engine = request.app.state.engine
    # what the engine says it serves (a drafter adds draft and cascade), else the methods every engine serves
    methods = list(getattr(engine, "speculation_methods", None) or ("auto", "none", "ngram", "prediction"))
    return P.ModelCard(
        id=engine.model_name, created=request.app.state.created, max_model_len=engine.max_model_len,
        speculation_methods=methods,
    )


@v1.get("/models")
async def list_models(request: Request) -> JSONResponse:
    return JSONResponse(P.ModelList(data=[_model_card(request)]).model_dump())


@v1.get("/models/{model_id:path}")
async def get_model(request: Request, model_id: str) -> JSONResponse:
    check_model(request.app.state.engine, model_id)
    return JSONResponse(_model_card(request).model_dump())


other = APIRouter()


@other.post("/tokenize", dependencies=[Depends(require_api_key)])
async def tokenize(request: Request) -> JSONResponse:
    """vLLM's /tokenize: the token ids the generation endpoints would feed the model (a prompt, or messages through
    the chat template)."""
    engine = request.app.state.engine
    req = await parse_body(request, P.TokenizeRequest)
    if req.model is not None:
        check_model(engine, req.model)
    tok = engine.tokenizer
    if (req.prompt is None) == (req.messages is None):
        raise APIError(400, "give either prompt or messages", param="prompt" if req.messages is None else "messages")
    if req.prompt is not None:
        ids = list(tok.encode(req.prompt, add_special_tokens=req.add_special_tokens is not False))
    else:
        tools = ToolChoice(tuple(t.model_dump(exclude_none=True) for t in req.tools), "auto") if req.tools else None
        ids = P.chat_prompt_ids(tok, req.messages, tools, P.rendering(req))
        if req.add_special_tokens:
            ids = tok.build_inputs_with_special_tokens(ids)
    body = {"count": len(ids), "max_model_len": engine.max_model_len, "tokens": ids}
    if req.return_token_strs:
        body["token_strs"] = tok.convert_ids_to_tokens(ids)
    return JSONResponse(body)


@other.post("/detokenize", dependencies=[Depends(require_api_key)])
async def detokenize(request: Request) -> JSONResponse:
    engine = request.app.state.engine
    req = await parse_body(request, P.DetokenizeRequest)
    if req.model is not None:
        check_model(engine, req.model)
    size = len(engine.tokenizer)
    bad = next((i for i, t in enumerate(req.tokens) if not 0 <= t < size), None)
    if bad is not None:
        raise APIError(400, f"token id {req.tokens[bad]} is not in the vocabulary (0..{size - 1})", param=f"tokens[{bad}]")
    return JSONResponse({"prompt": engine.tokenizer.decode(req.tokens)})


@other.get("/", include_in_schema=False)
async def playground() -> FileResponse:
    """The playground page (static; it talks to /v1 like any client)."""
    return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})


@other.get("/health")
async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok", "model": request.app.state.engine.model_name})


@other.get("/metrics", dependencies=[Depends(require_api_key)])
async def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@other.get("/openapi.json", dependencies=[Depends(require_api_key)], include_in_schema=False)
async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(openapi_document(request.app))


def build_app(engine, api_key: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
              allowed_origins: Sequence[str] = ()) -> FastAPI:
    """The FastAPI app serving ``engine`` (an AsyncEngine). ``api_key`` requires ``Authorization: Bearer``
    on every endpoint but /health (compared in constant time). Bodies over ``max_body_bytes`` get 413.
    ``allowed_origins``: web pages of these origins (``*``: any) may call the API from a browser (CORS); none by
    default, as a server on localhost answers any page the user opens otherwise (the playground is same-origin)."""
    app = FastAPI(title="foretell", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.engine = engine
    app.state.api_key = api_key or None
    app.state.created = int(time.time())
    app.state.token_texts = TokenTexts(engine.tokenizer)
    app.state.metrics = ServerMetrics(engine)
    app.state.responses = R.ResponseStore()
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    app.add_middleware(_CountRequests, metrics=app.state.metrics)
    if allowed_origins:  # outermost: a preflight is answered before auth and limits
        app.add_middleware(CORSMiddleware, allow_origins=list(allowed_origins), allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["*"], expose_headers=["*"])
    app.include_router(v1)
    app.include_router(other)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
