"""OpenAI's Responses API (``POST /v1/responses``), served through the chat path.

A request is translated into a chat completion request (``input`` items → messages, ``instructions`` → a
system message first, ``text.format`` → ``response_format``, flat function ``tools`` → chat tools,
``max_output_tokens`` → ``max_completion_tokens``), generated as one choice, and answered as a Response object
(or its stream of typed events: ``response.created`` … ``response.completed``). Predictions work as on chat:
``prediction`` and ``prediction_search_length`` are extensions here (OpenAI's Responses API has no
``prediction``), as are ``seed``, ``stop`` and the chat sampling extensions.

Responses are kept (``store``, true by default, as OpenAI) in a bounded in-memory store, so that
``previous_response_id`` continues a conversation and ``GET``/``DELETE /v1/responses/{id}`` find them; the
oldest are dropped beyond ``ResponseStore.capacity``. Not served (400 naming the field): background
responses, server-side conversations, stored prompts, non-function tools, image/file/audio inputs.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Any, Literal, NamedTuple, Union

from pydantic import BaseModel, ConfigDict, Field

from foretell.server import protocol as P
from foretell.server.errors import APIError, bad_request

LOGPROBS_INCLUDE = "message.output_text.logprobs"
_TEXT_PARTS = ("input_text", "output_text", "text")
_ROLES = ("user", "system", "developer", "assistant")


# -- requests -------------------------------------------------------------------------------------
PartsOrText = Union[str, list[P.ContentPart]]


class InputItem(P.Strict):
    """A message (``role`` + ``content``), a ``function_call`` the model made, or a ``function_call_output``."""

    type: str | None = None  # "message" where a role is given
    role: str | None = None
    content: PartsOrText | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: PartsOrText | None = None


class FunctionTool(P.Strict):
    type: str
    name: str | None = Field(None, min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamedTool(P.Strict):
    type: str
    name: str | None = None


class TextFormat(P.Strict):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class TextConfig(P.Strict):
    format: TextFormat | None = None
    verbosity: str | None = None


class ResponsesRequest(P.Strict):
    model: str
    input: str | list[InputItem] | None = None
    instructions: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    top_logprobs: int | None = Field(None, ge=0, le=20)
    include: list[str] | None = None
    stream: bool | None = None
    store: bool | None = None
    metadata: dict[str, str] | None = None
    previous_response_id: str | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedTool | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: int | None = Field(None, ge=1)
    text: TextConfig | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: Any = None  # ignored
    background: bool | None = None
    conversation: Any = None
    prompt: Any = None
    # extensions (as on chat completions)
    prediction: P.Prediction | None = None
    prediction_search_length: int | None = Field(None, ge=1)
    seed: int | None = Field(None, ge=-P.INT64, lt=P.INT64)
    stop: str | list[str] | None = None
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    logit_bias: dict[str, Any] | None = None
    top_k: int | None = Field(None, ge=-1)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(None, gt=0.0, le=10.0)
    ignore_eos: bool | None = None
    speculation: P.Speculation | None = None

    @property
    def wants_logprobs(self) -> bool:
        return LOGPROBS_INCLUDE in (self.include or ()) or bool(self.top_logprobs)


FIELD_NAMES = P.FIELD_NAMES | P.field_names(ResponsesRequest, InputItem, FunctionTool, NamedTool, TextFormat,
                                            TextConfig) | {"schema"}


# -- the conversation ------------------------------------------------------------------------------
def _text(content: PartsOrText | None, param: str) -> str:
    return P.join_text(content, param, "\n", _TEXT_PARTS)


def input_messages(items: str | list[InputItem] | None) -> list[P.Message]:
    """``input`` as chat messages: consecutive function calls become one assistant message's tool_calls (joined
    to the assistant text just before them), their outputs tool messages; reasoning items are skipped."""
    if items is None:
        return []
    if isinstance(items, str):
        return [P.Message(role="user", content=items)]
    out: list[P.Message] = []
    for i, item in enumerate(items):
        kind = item.type or ("message" if item.role is not None else None)
        if kind == "message":
            if item.role not in _ROLES:
                raise bad_request(f"input[{i}].role", f"role {item.role!r} is not supported; use {', '.join(_ROLES)}")
            if item.content is None:
                raise bad_request(f"input[{i}].content", "a message needs content")
            out.append(P.Message(role=item.role, content=_text(item.content, f"input[{i}].content")))
        elif kind == "function_call":
            for name in ("call_id", "name", "arguments"):
                if getattr(item, name) is None:
                    raise bad_request(f"input[{i}].{name}", f"a function_call item needs {name}")
            call = P.ToolCallIn(id=item.call_id, function=P.FunctionCallIn(name=item.name, arguments=item.arguments))
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":
                last.tool_calls = [*(last.tool_calls or []), call]
            else:
                out.append(P.Message(role="assistant", content=None, tool_calls=[call]))
        elif kind == "function_call_output":
            if item.call_id is None or item.output is None:
                raise bad_request(f"input[{i}]", "a function_call_output item needs call_id and output")
            out.append(P.Message(role="tool", content=_text(item.output, f"input[{i}].output"), tool_call_id=item.call_id))
        elif kind == "reasoning":
            continue
        else:
            raise bad_request(f"input[{i}].type", f"input items of type {kind!r} are not supported; "
                              "use messages, function_call and function_call_output")
    return out


def _chat_tools(req: ResponsesRequest) -> tuple[list[P.Tool] | None, Any]:
    tools = None
    if req.tools is not None:
        tools = []
        for i, t in enumerate(req.tools):
            if t.type != "function":
                raise bad_request(f"tools[{i}].type", f"tools of type {t.type!r} are not supported; only 'function'")
            if t.name is None:
                raise bad_request(f"tools[{i}].name", "a function tool needs a name")
            fn = P.FunctionDef(name=t.name, description=t.description, parameters=t.parameters, strict=t.strict)
            tools.append(P.Tool(type="function", function=fn))
    choice = req.tool_choice
    if isinstance(choice, NamedTool):
        if choice.type != "function" or not choice.name:
            raise bad_request("tool_choice", "tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'name': ...}")
        choice = P.NamedToolChoice(type="function", function=P.NamedFunction(name=choice.name))
    return tools, choice


def _response_format(text: TextConfig | None) -> dict | None:
    fmt = text.format if text is not None else None
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return {"type": "json_object"}
    if fmt.schema_ is None:
        raise bad_request("text.format.schema", "a json_schema format needs its schema")
    return {"type": "json_schema", "json_schema": {"name": fmt.name or "response", "schema": fmt.schema_}}


def check_supported(req: ResponsesRequest) -> None:
    if req.background:
        raise bad_request("background", "background responses are not supported by this server")
    if req.conversation is not None:
        raise bad_request("conversation", "conversations are not supported by this server; use previous_response_id")
    if req.prompt is not None:
        raise bad_request("prompt", "stored prompts are not supported by this server")
    if req.input is None and req.previous_response_id is None:
        raise bad_request("input", "input is required")


def to_chat(req: ResponsesRequest, history: list[P.Message]) -> tuple[P.ChatCompletionRequest, list[P.Message]]:
    """The chat request this Responses request amounts to, and its conversation without the instructions (what a
    later ``previous_response_id`` continues)."""
    conversation = [*history, *input_messages(req.input)]
    if not conversation:
        raise bad_request("input", "input must hold at least one message")
    messages = [P.Message(role="system", content=req.instructions)] if req.instructions else []
    tools, choice = _chat_tools(req)
    chat = P.ChatCompletionRequest(
        model=req.model, messages=messages + conversation, max_completion_tokens=req.max_output_tokens,
        temperature=req.temperature, top_p=req.top_p, seed=req.seed, stop=req.stop, stream=req.stream,
        presence_penalty=req.presence_penalty, frequency_penalty=req.frequency_penalty, logit_bias=req.logit_bias,
        prediction=req.prediction, prediction_search_length=req.prediction_search_length, top_k=req.top_k,
        min_p=req.min_p, repetition_penalty=req.repetition_penalty, ignore_eos=req.ignore_eos,
        speculation=req.speculation, logprobs=req.wants_logprobs or None,
        top_logprobs=req.top_logprobs if req.wants_logprobs else None,
        tools=tools, tool_choice=choice, parallel_tool_calls=req.parallel_tool_calls,
        response_format=_response_format(req.text),
    )
    return chat, conversation


_PARAMS = {"messages": "input", "max_completion_tokens": "max_output_tokens", "max_tokens": "max_output_tokens",
           "response_format": "text.format"}


def renamed(err: APIError) -> APIError:
    """A chat-path error with this endpoint's field names (``messages[3]`` → ``input``, ...)."""
    if err.param:
        head = err.param.split("[")[0].split(".")[0]
        if head in _PARAMS:
            new = _PARAMS[head]
            err.message = err.message.replace(err.param, new)
            err.param = new
    return err


# -- the store --------------------------------------------------------------------------------------
class Stored(NamedTuple):
    response: dict  # the Response object
    conversation: list[P.Message]  # the messages it ends (its input after the history, and its reply)
    input_items: list[dict]  # its own input, as items with ids (``GET .../input_items``)


class ResponseStore:
    """The last ``capacity`` stored responses by id."""

    def __init__(self, capacity: int = 1024):
        self.capacity = capacity
        self._items: OrderedDict[str, Stored] = OrderedDict()

    def put(self, stored: Stored) -> None:
        key = stored.response["id"]
        self._items[key] = stored
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def get(self, response_id: str, param: str = "response_id") -> Stored:
        try:
            return self._items[response_id]
        except KeyError:
            raise APIError(404 if param == "response_id" else 400, f"no stored response with id {response_id!r}",
                           param=param, code="not_found" if param == "response_id" else "previous_response_not_found") from None

    def delete(self, response_id: str) -> None:
        self.get(response_id)
        del self._items[response_id]


# -- output ---------------------------------------------------------------------------------------
class ResponseObject(BaseModel):
    """The Response object's outline (for the OpenAPI document; the server builds it with ``response_object``)."""

    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["in_progress", "completed", "incomplete"]
    model: str
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None


class DeletedResponse(BaseModel):
    id: str
    object: Literal["response.deleted"]
    deleted: bool


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex


def message_item(item_id: str, text: str, logprobs: list | None, status: str) -> dict:
    part = {"type": "output_text", "text": text, "annotations": []}
    if logprobs is not None:
        part["logprobs"] = logprobs
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": [part]}


def call_item(call: dict, status: str = "completed", arguments: str | None = None) -> dict:
    fn = call["function"]
    return {"type": "function_call", "id": "fc_" + call["id"].removeprefix("call_"), "call_id": call["id"],
            "name": fn["name"], "arguments": fn["arguments"] if arguments is None else arguments, "status": status}


def usage_object(usage: P.Usage) -> dict:
    done = usage.completion_tokens_details
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.prompt_tokens_details.cached_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0, "accepted_prediction_tokens": done.accepted_prediction_tokens,
                                  "rejected_prediction_tokens": done.rejected_prediction_tokens},
        "total_tokens": usage.total_tokens,
    }


def response_object(req: ResponsesRequest, response_id: str, created: int, model: str, status: str,
                    output: list[dict], usage: dict | None, foretell: dict | None = None) -> dict:
    """OpenAI's Response object (``status``: in_progress, completed or incomplete)."""
    tool_choice = req.tool_choice.model_dump(exclude_none=True) if isinstance(req.tool_choice, NamedTool) else (
        req.tool_choice or ("auto" if req.tools else "none"))
    fmt = req.text.format if req.text is not None and req.text.format is not None else None
    obj = {
        "id": response_id, "object": "response", "created_at": created, "status": status,
        "error": None, "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": req.instructions, "max_output_tokens": req.max_output_tokens, "model": model,
        "output": output, "parallel_tool_calls": req.parallel_tool_calls is not False,
        "previous_response_id": req.previous_response_id, "reasoning": None, "store": req.store is not False,
        "temperature": 1.0 if req.temperature is None else req.temperature,
        "text": {"format": fmt.model_dump(by_alias=True, exclude_none=True) if fmt else {"type": "text"}},
        "tool_choice": tool_choice, "tools": [t.model_dump(exclude_none=True) for t in req.tools or ()],
        "top_p": 1.0 if req.top_p is None else req.top_p, "truncation": req.truncation or "disabled",
        "usage": usage, "user": req.user if isinstance(req.user, str) else None, "metadata": req.metadata or {},
    }
    if foretell is not None:
        obj["foretell"] = foretell
    return obj


_ITEM_PREFIX = {"message": "msg_", "function_call": "fc_", "function_call_output": "fco_", "reasoning": "rs_"}


def input_items(items: str | list[InputItem] | None) -> list[dict]:
    """A request's ``input`` as OpenAI lists it back: items with ids, message text as parts."""
    if items is None:
        return []
    if isinstance(items, str):
        items = [InputItem(role="user", content=items)]
    out = []
    for item in items:
        kind = item.type or "message"
        d = {"id": new_id(_ITEM_PREFIX.get(kind, "item_")), **item.model_dump(exclude_none=True), "type": kind}
        if kind == "message":
            part = "output_text" if item.role == "assistant" else "input_text"
            content = item.content if isinstance(item.content, list) else [P.ContentPart(type=part, text=item.content or "")]
            d["content"] = [c.model_dump(exclude_none=True) for c in content]
            d["status"] = "completed"
        out.append(d)
    return out


def item_page(items: list[dict], after: str | None, limit: int, order: str) -> dict:
    """OpenAI's list of input items: ``limit`` of them after the item ``after``, in ``order``."""
    ordered = items if order == "asc" else items[::-1]
    start = 0
    if after is not None:
        ids = [it["id"] for it in ordered]
        if after not in ids:
            raise bad_request("after", f"no input item with id {after!r} in this response")
        start = ids.index(after) + 1
    page = ordered[start:start + limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": start + limit < len(ordered)}


def assistant_message(text: str | None, calls: list[dict]) -> P.Message:
    """The reply as a message of the conversation a later turn continues."""
    tool_calls = [P.ToolCallIn(id=c["id"], function=P.FunctionCallIn(**c["function"])) for c in calls] or None
    return P.Message(role="assistant", content=text, tool_calls=tool_calls)
