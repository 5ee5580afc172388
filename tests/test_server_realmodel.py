"""End to end with the packaged default model: ``foretell serve`` started as the README says (one server for the
module), requests through the official client: a prediction (the answer equals the one without, greedy, fp32),
tool calls, response_format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from test_cli import stop, wait_for_url

pytestmark = pytest.mark.realmodel

CODE = "def add(a, b):\n    return a + b\n"
MESSAGES = [{"role": "user", "content": f"Rename the function add to plus:\n\n{CODE}"}]


def _serve_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("foretell")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "foretell.cli"]
    return base + ["serve", "--port", "0", "--dtype", "float32", "--device", "cpu", "--log-level", "warning"]


def _hf_greedy(messages, max_new: int) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from foretell.models.loader import resolve_model

    path = resolve_model("default", progress=False).path
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=max_new, do_sample=False, repetition_penalty=1.0)
    return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


@pytest.fixture(scope="module")
def client():
    proc = subprocess.Popen(_serve_cmd(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = wait_for_url(proc, timeout_s=240)  # a first start converts the packaged GGUF once
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
    finally:
        stop(proc)


def test_serve_default_model_prediction_is_lossless(client):
    kw = dict(model="default", messages=MESSAGES, max_tokens=32, temperature=0)
    plain = client.chat.completions.create(**kw)
    answer = plain.choices[0].message.content
    assert answer == _hf_greedy(MESSAGES, 32)  # an independent reference: transformers' generate
    edited = CODE.replace("add", "plus")
    for prediction in (edited, answer):
        r = client.chat.completions.create(**kw, prediction={"type": "content", "content": prediction})
        assert r.choices[0].message.content == answer
        assert r.usage.completion_tokens == plain.usage.completion_tokens
        details = r.usage.completion_tokens_details
        assert 0 <= details.accepted_prediction_tokens <= r.usage.completion_tokens
        if prediction == answer:  # a perfect prediction is always worth drafting (a 2-token pass costs < 2)
            assert details.accepted_prediction_tokens > 0
        print(f"prediction accepted {details.accepted_prediction_tokens}/{r.usage.completion_tokens}", r.model_extra)


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What's the weather in Paris right now?"}]


def _streamed_call(client, **kw):
    calls, content, finish = [], "", None
    for chunk in client.chat.completions.create(**kw, stream=True):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            calls += choice.delta.tool_calls or []
            finish = choice.finish_reason or finish
    return calls, content, finish


@pytest.mark.parametrize("tool_choice", ["auto", "required", {"type": "function", "function": {"name": "get_weather"}}])
def test_the_default_model_calls_a_tool_through_the_official_client(client, tool_choice):
    """Qwen2.5-Coder-0.5B asked for the weather with a weather tool: OpenAI's tool_calls, streamed and not; the
    call's result sent back in the history is accepted. (With "auto" this model writes the call's JSON without
    the <tool_call> tags: read as a call.)"""
    kw = dict(model="default", messages=ASK, tools=WEATHER, tool_choice=tool_choice, max_tokens=48, temperature=0)
    r = client.chat.completions.create(**kw)
    (call,) = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and r.choices[0].message.content is None
    assert call.function.name == "get_weather" and "city" in json.loads(call.function.arguments)
    calls, content, finish = _streamed_call(client, **kw)
    assert finish == "tool_calls" and content == ""
    assert [(c.function.name, c.function.arguments) for c in calls] == [("get_weather", call.function.arguments)]
    history = ASK + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                     {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 18}'}]
    after = client.chat.completions.create(model="default", messages=history, tools=WEATHER, max_tokens=8, temperature=0)
    assert after.choices[0].finish_reason in ("stop", "length", "tool_calls")
    text = client.chat.completions.create(**{**kw, "tool_choice": "none"})
    assert text.choices[0].message.tool_calls is None and text.choices[0].message.content


def test_response_format_holds_the_reply_to_json_and_a_prediction_keeps_it(client):
    """json_object and json_schema on the default model: valid JSON (the free reply opens a code fence), the same
    with a prediction, which is then drafted from the first token."""
    doc = '{"name": "foretell", "version": "1.4.0", "deps": ["torch", "numpy"], "private": false}'
    messages = [{"role": "user", "content": f"Change the version to 2.0.1 and reply with the JSON only.\n\n{doc}"}]
    kw = dict(model="default", messages=messages, max_tokens=80, temperature=0)
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "string"},
                                               "deps": {"type": "array", "items": {"type": "string"}},
                                               "private": {"type": "boolean"}},
              "required": ["name", "version", "deps", "private"], "additionalProperties": False}
    for response_format in ({"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "pkg", "schema": schema}}):
        plain = client.chat.completions.create(**kw, response_format=response_format)
        assert plain.choices[0].finish_reason == "stop"
        assert set(json.loads(plain.choices[0].message.content)) == {"name", "version", "deps", "private"}
        r = client.chat.completions.create(**kw, response_format=response_format, prediction={"type": "content", "content": doc})
        assert r.choices[0].message.content == plain.choices[0].message.content
        assert r.usage.completion_tokens_details.accepted_prediction_tokens > 0
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(**kw, response_format={"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "strnig"}}}}})
    assert err.value.body["param"] == "response_format"


def test_the_responses_api_on_the_default_model(client):
    """/v1/responses through the official client: the chat reply, lossless with a prediction, a pydantic
    text_format parsed, and a function call item."""
    from pydantic import BaseModel

    plain = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=32, temperature=0)
    kw = dict(model="default", input=MESSAGES[0]["content"], max_output_tokens=32, temperature=0)
    r = client.responses.create(**kw)
    assert r.output_text == plain.choices[0].message.content
    for prediction in (CODE.replace("add", "plus"), r.output_text):
        predicted = client.responses.create(**kw, extra_body={"prediction": {"type": "content", "content": prediction}})
        assert predicted.output_text == r.output_text
    assert predicted.usage.output_tokens_details.model_extra["accepted_prediction_tokens"] > 0

    class Point(BaseModel):
        x: int
        y: int

    parsed = client.responses.parse(model="default", input="Give the point with x=3 and y=4 as JSON.", text_format=Point,
                                    temperature=0, max_output_tokens=40)
    assert isinstance(parsed.output_parsed, Point)
    tool = {"type": "function", "name": "get_weather", "description": "Current weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    called = client.responses.create(model="default", input="What's the weather in Paris?", tools=[tool],
                                     tool_choice="required", temperature=0, max_output_tokens=40)
    calls = [o for o in called.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather" and "city" in json.loads(calls[0].arguments)


def test_echo_with_logprobs_scores_a_prompt_on_the_default_model(client):
    """``echo`` + ``logprobs`` + ``max_tokens: 0`` (a harness's loglikelihood request): the prompt back with each
    token's logprob, close to transformers' fp32 forward pass (the server runs its own route: int8 inputs on this
    kind of CPU, as llama.cpp)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from foretell.models.loader import resolve_model

    r = client.completions.create(model="default", prompt=CODE, max_tokens=0, echo=True, logprobs=1)
    lp = r.choices[0].logprobs
    path = resolve_model("default", progress=False).path
    ids = AutoTokenizer.from_pretrained(path).encode(CODE)
    with torch.no_grad():
        rows = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)(torch.tensor([ids])).logits[0].log_softmax(-1)
    want = [rows[i, ids[i + 1]].item() for i in range(len(ids) - 1)]
    assert r.choices[0].text == CODE and lp.token_logprobs[0] is None and len(lp.tokens) == len(ids)
    assert lp.token_logprobs[1:] == pytest.approx(want, abs=0.35)
