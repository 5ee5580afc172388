"""OpenAI's request and response shapes, and their translation into engine requests.

Requests validate strictly (types are not coerced: ``"0.5"`` is not a temperature) but ignore fields they
do not know, as OpenAI clients send extras. Known OpenAI fields that foretell cannot honour (the deprecated
``functions``, suffix, best_of other than n) are refused with 400 rather than silently ignored. ``response_format``
(JSON object or schema) is enforced by masking the logits (:mod:`foretell.core.grammar`).
``tools`` and ``tool_choice`` are served through the model's chat template (:mod:`foretell.server.tools`).

Extensions beyond OpenAI: ``prediction`` on /v1/completions too, and with n > 1, logprobs, penalties and
max_completion_tokens (all lossless); ``prediction_search_length`` (Azure's
``x-ms-oai-ev3-predictor_search_length`` header, the body wins); ``top_k``, ``min_p``,
``repetition_penalty``, ``ignore_eos``; ``stream_options.include_provenance`` (per-chunk spans taken from
the prediction); ``speculation_methods`` on model cards.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from foretell.config import SamplingParams, SpeculationParams
from foretell.core.grammar import schema_text
from foretell.engine.api import GenerationRequest
from foretell.server.errors import bad_request
from foretell.server.tools import ToolChoice

SEARCH_LENGTH_HEADER = "x-ms-oai-ev3-predictor_search_length"
MAX_STOP = 4
INT64 = 2**63


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


# -- requests -------------------------------------------------------------------------------------
class ContentPart(Strict):
    """A content part; only ``{"type": "text", "text": ...}`` is served (others → 400 naming the part)."""

    type: str
    text: str | None = None


Content = Union[str, list[ContentPart]]


class FunctionCallIn(Strict):
    name: str
    arguments: str


class ToolCallIn(Strict):
    """A call in an assistant message of the history (as OpenAI returned it)."""

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCallIn


class Message(Strict):
    role: str
    content: Content | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None


class FunctionDef(Strict):
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(Strict):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(Strict):
    name: str


class NamedToolChoice(Strict):
    type: Literal["function"]
    function: NamedFunction


class Prediction(Strict):
    type: Literal["content"]
    content: Content


class Speculation(Strict):
    """The ``speculation`` extension: which draft source, and for cascades the rule and its lenience."""

    method: Literal["auto", "none", "ngram", "prediction", "draft", "cascade"] = "auto"
    k_max: int | None = Field(None, ge=0, le=1024)
    rule: Literal["chow", "diff", "opt", "v1", "v2", "v3"] | None = None
    alpha: float | None = Field(None, ge=-1.0, le=1.0)


class StreamOptions(Strict):
    include_usage: bool | None = None
    include_provenance: bool | None = None  # extension: per-chunk spans taken from the prediction


class _Common(Strict):
    """Fields shared by /v1/chat/completions and /v1/completions (None = OpenAI's default)."""

    model: str
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    n: int | None = Field(None, ge=1, le=128)
    seed: int | None = Field(None, ge=-INT64, lt=INT64)
    stop: str | list[str] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    logit_bias: dict[str, Any] | None = None
    user: Any = None  # ignored
    prediction: Prediction | None = None
    # extensions
    prediction_search_length: int | None = Field(None, ge=1)
    top_k: int | None = Field(None, ge=-1)  # 0 or -1 = off
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(None, gt=0.0, le=10.0)
    ignore_eos: bool | None = None
    speculation: Speculation | None = None

    @field_validator("stop")
    @classmethod
    def _check_stop(cls, v):
        stops = [v] if isinstance(v, str) else (v or [])
        if len(stops) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop sequences are allowed")
        if any(not s for s in stops):
            raise ValueError("stop sequences must be non-empty strings")
        return v


class ChatCompletionRequest(_Common):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    functions: list[Any] | None = None
    response_format: dict[str, Any] | None = None
    modalities: list[str] | None = None
    # vLLM's extensions: how the chat template renders the messages
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class CompletionRequest(_Common):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(None, ge=0)  # 0 only with echo: the prompt scored, nothing generated
    logprobs: int | None = Field(None, ge=0, le=5)
    echo: bool | None = None
    suffix: str | None = None
    best_of: int | None = Field(None, ge=1)


class TokenizeRequest(Strict):
    """vLLM's ``/tokenize``: a ``prompt`` as /v1/completions tokenises it, or chat ``messages`` (and ``tools``) as
    /v1/chat/completions renders them."""

    model: str | None = None
    prompt: str | None = None
    messages: list[Message] | None = None
    tools: list[Tool] | None = None
    add_special_tokens: bool | None = None  # default: True for a prompt, False for messages (vLLM's)
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    return_token_strs: bool = False


class DetokenizeRequest(Strict):
    model: str | None = None
    tokens: list[int]


def field_names(*models: type[BaseModel]) -> frozenset[str]:
    names: set[str] = set()
    for m in models:
        names.update(m.model_fields)
    return frozenset(names)


FIELD_NAMES = field_names(
    ChatCompletionRequest, CompletionRequest, Message, ContentPart, Prediction, StreamOptions, Speculation,
    ToolCallIn, FunctionCallIn, Tool, FunctionDef, NamedToolChoice, TokenizeRequest, DetokenizeRequest,
)


# -- refusals of known-but-unsupported fields ------------------------------------------------------
def check_supported_chat(req: ChatCompletionRequest) -> None:
    if req.functions:
        raise bad_request("functions", "functions are not supported by this server")
    json_schema_of(req.response_format)  # 400 for a malformed response_format
    if req.modalities and req.modalities != ["text"]:
        raise bad_request("modalities", "only the text modality is supported")
    if req.top_logprobs is not None and not req.logprobs:
        raise bad_request("top_logprobs", "top_logprobs requires logprobs to be true")
    _check_common(req)


def check_supported_completion(req: CompletionRequest) -> None:
    if req.max_tokens == 0 and not req.echo:
        raise bad_request("max_tokens", "max_tokens must be >= 1 (0 only with echo: the prompt alone, scored with logprobs)")
    if req.suffix:
        raise bad_request("suffix", "suffix is not supported by this server")
    if req.best_of is not None and req.best_of != (req.n or 1):
        raise bad_request("best_of", "best_of other than n is not supported by this server")
    _check_common(req)


def _check_common(req: _Common) -> None:
    if req.stream_options is not None and not req.stream:
        raise bad_request("stream_options", "stream_options is only allowed when stream is true")


# -- translation ----------------------------------------------------------------------------------
def join_text(content: Content | None, param: str, sep: str, types: tuple[str, ...] = ("text",)) -> str:
    """Text of string content or text parts (of ``types``); any other part type → 400 naming it."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(content):
        if part.type not in types:
            raise bad_request(f"{param}[{j}].type", f"content parts of type {part.type!r} are not supported; only "
                              + ", ".join(repr(t) for t in types))
        if part.text is None:
            raise bad_request(f"{param}[{j}].text", "a text part needs a 'text' string")
        texts.append(part.text)
    return sep.join(texts)


_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def _template_call(call: ToolCallIn) -> dict:
    """A history call as chat templates take it: the arguments as an object where they parse (templates
    write them with ``tojson``; a JSON string would be quoted twice)."""
    try:
        arguments = json.loads(call.function.arguments)
    except ValueError:
        arguments = call.function.arguments
    return {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": arguments}}


def chat_messages(messages: list[Message]) -> list[dict]:
    out = []
    for i, m in enumerate(messages):
        role = _ROLES.get(m.role)
        if role is None:
            raise bad_request(f"messages[{i}].role", f"role {m.role!r} is not supported; use system, developer, user, assistant or tool")
        if m.content is None and role != "assistant":
            raise bad_request(f"messages[{i}].content", "content is required")
        if m.tool_calls and role != "assistant":
            raise bad_request(f"messages[{i}].tool_calls", "only assistant messages carry tool_calls")
        message = {"role": role, "content": join_text(m.content, f"messages[{i}].content", "\n")}
        if m.tool_calls:
            message["tool_calls"] = [_template_call(c) for c in m.tool_calls]
        if role == "tool" and m.tool_call_id is not None:
            message["tool_call_id"] = m.tool_call_id
        out.append(message)
    return out


def tool_choice(req: ChatCompletionRequest) -> ToolChoice:
    """The request's tools and tool_choice (OpenAI's defaults: "auto" with tools, "none" without)."""
    tools = tuple(t.model_dump(exclude_none=True) for t in req.tools or ())
    choice = req.tool_choice or ("auto" if tools else "none")
    if isinstance(choice, NamedToolChoice):
        name = choice.function.name
        if name not in {t["function"]["name"] for t in tools}:
            raise bad_request("tool_choice", f"tool_choice names the function {name!r}, which is not among the tools")
        return ToolChoice(tools, "named", name, parallel=False)
    if choice != "none" and not tools:
        raise bad_request("tool_choice", f"tool_choice {choice!r} needs tools")
    return ToolChoice(tools, choice, parallel=req.parallel_tool_calls is not False)


@dataclass(frozen=True)
class Rendering:
    """How the chat template renders a conversation (vLLM's extensions): with the generation prompt (the default),
    or continuing the last (assistant) message, as a prefill the reply goes on from; ``kwargs`` reach the template."""

    add_generation_prompt: bool = True
    continue_final_message: bool = False
    kwargs: tuple[tuple[str, Any], ...] = ()


_RESERVED_TEMPLATE_KWARGS = {"conversation", "messages", "tools", "documents", "add_generation_prompt",
                             "continue_final_message", "tokenize", "return_dict", "chat_template", "tokenizer"}


def rendering(req) -> Rendering:
    """A chat (or /tokenize) request's ``add_generation_prompt``, ``continue_final_message`` and
    ``chat_template_kwargs``, checked (400s naming the field)."""
    cont = bool(req.continue_final_message)
    if cont and req.add_generation_prompt:
        raise bad_request("continue_final_message", "continue_final_message cannot be combined with add_generation_prompt")
    if cont and (not req.messages or req.messages[-1].role != "assistant"):
        raise bad_request("continue_final_message", "continue_final_message needs an assistant message last")
    kwargs = req.chat_template_kwargs or {}
    reserved = sorted(set(kwargs) & _RESERVED_TEMPLATE_KWARGS)
    if reserved:
        raise bad_request("chat_template_kwargs", f"chat_template_kwargs cannot set {', '.join(reserved)}")
    add = (not cont) if req.add_generation_prompt is None else req.add_generation_prompt
    return Rendering(add, cont, tuple(sorted(kwargs.items())))


def chat_prompt_ids(tokenizer, messages: list[Message], tools: ToolChoice | None = None,
                    how: Rendering = Rendering()) -> list[int]:
    """Render the model's chat template (with the generation prompt, unless ``how`` says otherwise) and tokenise it
    as is; with active ``tools``, the template gets them and the assistant turn starts with the forced call's
    opening, if any."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise bad_request("messages", "this model has no chat template; use /v1/completions")
    conversation = chat_messages(messages)
    extra = dict(how.kwargs)
    if how.continue_final_message:
        extra["continue_final_message"] = True
    if tools is not None and tools.active:
        if "tools" not in str(template):
            raise bad_request("tools", "this model's chat template does not render tools")
        extra["tools"] = list(tools.tools)
    try:
        text = tokenizer.apply_chat_template(conversation, add_generation_prompt=how.add_generation_prompt, tokenize=False,
                                             **extra)
    except Exception as exc:  # the template rejected the conversation (e.g. role order)
        raise bad_request("messages", f"the chat template rejected the messages: {exc}") from exc
    if tools is not None and tools.active:
        text += tools.opening()
    return list(tokenizer.encode(text, add_special_tokens=False))


def completion_prompts(tokenizer, prompt) -> list[list[int]]:
    """One token list per prompt: a string, a list of strings, token ids, or lists of token ids."""
    if isinstance(prompt, str):
        prompt = [prompt]
    if prompt and isinstance(prompt[0], int):
        prompt = [prompt]
    if not prompt:
        raise bad_request("prompt", "prompt must not be empty")
    out = []
    for i, p in enumerate(prompt):
        ids = list(tokenizer.encode(p)) if isinstance(p, str) else list(p)
        if not ids:
            raise bad_request("prompt", f"prompt {i} is empty")
        out.append(ids)
    return out


def prompt_texts(tokenizer, prompt, prompts: list[list[int]]) -> list[str]:
    """The text of each prompt, for ``echo``: a string prompt as sent, token ids decoded."""
    if isinstance(prompt, str):
        return [prompt]
    if prompt and isinstance(prompt[0], str):
        return list(prompt)
    return [tokenizer.decode(ids) for ids in prompts]


def prediction_ids(tokenizer, prediction: Prediction | None) -> tuple[int, ...] | None:
    if prediction is None:
        return None
    text = join_text(prediction.content, "prediction.content", "")
    ids = tuple(tokenizer.encode(text, add_special_tokens=False))
    return ids or None


def search_length(req: _Common, header_value: str | None) -> int | None:
    """The body's ``prediction_search_length`` wins over Azure's header."""
    if req.prediction_search_length is not None:
        return req.prediction_search_length
    if header_value is None:
        return None
    try:
        value = int(header_value.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise bad_request(SEARCH_LENGTH_HEADER, f"header {SEARCH_LENGTH_HEADER} must be an integer >= 1")
    return value


def json_schema_of(response_format: dict[str, Any] | None) -> str | None:
    """OpenAI's ``response_format`` as the text of the JSON schema the reply must follow (None: free text):
    ``{"type": "json_object"}`` is any JSON object; ``{"type": "json_schema", "json_schema": {"name": ...,
    "schema": {...}}}`` that schema."""
    if response_format is None:
        return None
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return schema_text({"type": "object"})
    if kind != "json_schema":
        raise bad_request("response_format.type", "must be 'text', 'json_object' or 'json_schema'")
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise bad_request("response_format.json_schema", "must be an object with the schema in 'schema'")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise bad_request("response_format.json_schema.schema", "must be a JSON schema (an object)")
    return schema_text(schema)


def sampling_params(req: _Common, logprobs: int | None, seed_offset: int) -> SamplingParams:
    temperature = 1.0 if req.temperature is None else req.temperature
    top_p = 1.0 if req.top_p is None else req.top_p
    if top_p == 0.0:  # the nucleus shrinks to the top token: greedy
        temperature, top_p = 0.0, 1.0
    return SamplingParams(
        temperature=temperature,
        top_p=top_p,
        top_k=max(req.top_k or 0, 0),
        min_p=req.min_p or 0.0,
        presence_penalty=req.presence_penalty or 0.0,
        frequency_penalty=req.frequency_penalty or 0.0,
        repetition_penalty=1.0 if req.repetition_penalty is None else req.repetition_penalty,
        seed=None if req.seed is None else (req.seed + seed_offset) % 2**63,
        logprobs=logprobs,
        logit_bias=logit_bias(req.logit_bias),
        json_schema=json_schema_of(getattr(req, "response_format", None)),
    )


def logit_bias(value: dict[str, Any] | None) -> tuple[tuple[int, float], ...]:
    """OpenAI's ``{"token id": bias}`` as sorted (id, bias) pairs; range checks are SamplingParams'."""
    pairs = []
    for key, bias in (value or {}).items():
        try:
            token = int(key)
        except ValueError:
            raise bad_request("logit_bias", f"keys must be token ids (integers as strings), got {key!r}") from None
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not math.isfinite(bias):
            raise bad_request("logit_bias", f"the bias for token {key} must be a number between -100 and 100")
        pairs.append((token, float(bias)))
    return tuple(sorted(pairs))


def stop_strings(req: _Common) -> tuple[str, ...]:
    if req.stop is None:
        return ()
    return (req.stop,) if isinstance(req.stop, str) else tuple(req.stop)


@dataclass(frozen=True)
class Plan:
    """What one HTTP request asks of the engine: one GenerationRequest per choice."""

    requests: list[GenerationRequest]
    prompt_index: list[int]  # per choice: which prompt it belongs to
    prompt_lens: list[int]  # per prompt


def plan_requests(
    req: _Common,
    prompts: list[list[int]],
    max_tokens: int | None,
    default_max_tokens,
    logprobs: int | None,
    speculation: SpeculationParams,
) -> Plan:
    """Expand prompts × n into engine requests (choice index = prompt index × n + j; seed + j per choice)."""
    n = req.n or 1
    stops = stop_strings(req)
    requests, index = [], []
    for p, ids in enumerate(prompts):
        limit = max_tokens if max_tokens is not None else default_max_tokens(len(ids))
        for j in range(n):
            requests.append(
                GenerationRequest(
                    prompt_ids=ids,
                    max_tokens=limit,
                    sampling=sampling_params(req, logprobs, j),
                    speculation=speculation,
                    stop=stops,
                    ignore_eos=bool(req.ignore_eos),
                )
            )
            index.append(p)
    return Plan(requests, index, [len(ids) for ids in prompts])


# -- responses ------------------------------------------------------------------------------------
class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0


class CompletionTokensDetails(BaseModel):
    reasoning_tokens: int = 0
    accepted_prediction_tokens: int = 0
    rejected_prediction_tokens: int = 0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails


class SourceCounts(BaseModel):
    proposed: int = 0
    accepted: int = 0


class ForetellStats(BaseModel):
    """Non-standard: how the answer was produced (summed over choices; times are the slowest choice's).
    ``sources``: draft tokens proposed and accepted per draft source (prediction, ngram, ...)."""

    forward_passes: int
    prefill_passes: int
    draft_tokens_proposed: int
    draft_tokens_accepted: int
    sources: dict[str, SourceCounts]
    cascade_drafter_tokens: int = 0  # cascades: output tokens taken from the drafter's distribution
    queue_s: float
    ttft_s: float
    decode_s: float


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprobOut(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprobOut] | None
    refusal: None = None


class FunctionCallOut(BaseModel):
    name: str
    arguments: str


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: None = None
    tool_calls: list[ToolCallOut] | None = Field(None, exclude_if=lambda calls: calls is None)  # only with calls


class ChatChoice(BaseModel):
    index: int
    message: ChatMessageOut
    logprobs: ChoiceLogprobs | None
    finish_reason: str


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChatChoice]
    usage: Usage
    foretell: ForetellStats | None = None


class ChatChunkChoice(BaseModel):
    index: int
    delta: dict
    logprobs: ChoiceLogprobs | None = None
    finish_reason: str | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChatChunkChoice]
    usage: Usage | None = None
    foretell: ForetellStats | None = None


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float | None]  # None: the prompt's first token (echo)
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: str | None


class Completion(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    system_fingerprint: str
    choices: list[CompletionChoice]
    usage: Usage | None = None
    foretell: ForetellStats | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "foretell"
    max_model_len: int
    speculation_methods: list[str]  # extension: the values of the request field speculation.method served


class TokenizeResponse(BaseModel):
    count: int
    max_model_len: int
    tokens: list[int]
    token_strs: list[str] | None = None


class DetokenizeResponse(BaseModel):
    prompt: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
