"""The Responses API (/v1/responses) through the official ``openai`` client: the real engine on the tiny random
model (fp32, greedy) for identity with the chat path, predictions, streaming, logprobs and stored conversations;
a fake engine with a tools template for function calls."""

from __future__ import annotations

import json

import openai
import pytest
from fastapi.testclient import TestClient

from foretell.server import build_app
from foretell.server import protocol as P
from foretell.server.responses import InputItem, input_messages
from test_server_openai import client, server  # noqa: F401 - the tiny engine's server and its official client
from test_server_tools import CALL, ToolEngine, tools_tokenizer  # noqa: F401 - a fixture

PROMPT = "def add(a, b):"
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}


def respond(client, **kw):
    kw.setdefault("input", PROMPT)
    kw.setdefault("max_output_tokens", 24)
    kw.setdefault("temperature", 0)
    return client.responses.create(model="tiny", **kw)


def chat(client, messages, **kw):
    return client.chat.completions.create(model="tiny", messages=messages, max_completion_tokens=24, temperature=0, **kw)


def passes(response) -> int:
    return response.model_extra["foretell"]["forward_passes"]


# -- the same generation as the chat path -----------------------------------------------------------
def test_a_response_is_the_chat_reply_with_its_usage(client):
    r = respond(client, instructions="Be brief.")
    c = chat(client, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}])
    assert r.output_text == c.choices[0].message.content and r.output_text
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"  # 24 tokens, no EOS
    (item,) = r.output
    assert item.type == "message" and item.role == "assistant" and item.id.startswith("msg_")
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.usage.output_tokens == c.usage.completion_tokens == 24
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.instructions == "Be brief." and r.max_output_tokens == 24 and r.temperature == 0


def test_a_prediction_is_lossless_and_saves_passes(client):
    plain = respond(client)
    predicted = respond(client, extra_body={"prediction": {"type": "content", "content": plain.output_text}})
    garbage = respond(client, extra_body={"prediction": {"type": "content", "content": "zq " * 40}})
    assert predicted.output_text == plain.output_text == garbage.output_text
    details = predicted.usage.output_tokens_details.model_extra
    assert details["accepted_prediction_tokens"] > 0
    assert passes(predicted) < passes(plain)
    assert plain.usage.output_tokens_details.model_extra["accepted_prediction_tokens"] == 0


def test_the_stream_carries_the_same_reply_as_typed_events(client):
    plain = respond(client)
    events = list(respond(client, stream=True, extra_body={"prediction": {"type": "content", "content": plain.output_text}}))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == plain.output_text == events[-4].text
    final = events[-1].response
    assert final.output_text == plain.output_text and final.id == events[0].response.id
    assert final.output[0].id == events[2].item.id
    assert final.usage.output_tokens == 24


def test_the_sdk_stream_helper_gets_the_completed_response(client):
    plain = respond(client)
    stop = plain.output_text[6:9]
    with client.responses.stream(model="tiny", input=PROMPT, max_output_tokens=24, temperature=0,
                                 extra_body={"stop": [stop]}) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.status == "completed" and final.incomplete_details is None
    assert final.output_text == "".join(deltas) == plain.output_text[: plain.output_text.index(stop)]


def test_logprobs_match_the_chat_path(client):
    r = respond(client, include=["message.output_text.logprobs"], top_logprobs=2)
    c = chat(client, [{"role": "user", "content": PROMPT}], logprobs=True, top_logprobs=2)
    got = r.output[0].content[0].logprobs
    want = c.choices[0].logprobs.content
    assert [(lp.token, round(lp.logprob, 5)) for lp in got] == [(lp.token, round(lp.logprob, 5)) for lp in want]
    assert all(len(lp.top_logprobs) == 2 for lp in got)
    assert respond(client).output[0].content[0].logprobs is None  # not asked


def test_a_json_schema_format_is_the_chat_response_format(client):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}
    r = respond(client, text={"format": {"type": "json_schema", "name": "thing", "schema": schema, "strict": True}},
                max_output_tokens=16)
    c = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": PROMPT}], max_completion_tokens=16, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "thing", "schema": schema}})
    free = respond(client, max_output_tokens=16)
    assert r.output_text == c.choices[0].message.content != free.output_text
    assert r.output_text.lstrip().startswith("{")
    assert r.text.format.type == "json_schema"


# -- stored conversations ---------------------------------------------------------------------------
def test_previous_response_id_continues_the_conversation(client):
    first = respond(client, instructions="Be brief.")
    follow = respond(client, previous_response_id=first.id, input="and subtract?")
    stateless = respond(client, input=[
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": [{"type": "output_text", "text": first.output_text}]},
        {"role": "user", "content": "and subtract?"},
    ])
    assert follow.output_text == stateless.output_text
    assert follow.usage.input_tokens == stateless.usage.input_tokens > first.usage.input_tokens + 24
    assert follow.previous_response_id == first.id
    assert follow.usage.input_tokens_details.cached_tokens > 0  # the earlier turn's prefix


def test_retrieve_delete_and_store_false(client):
    r = respond(client)
    assert client.responses.retrieve(r.id).output_text == r.output_text
    assert client.responses.delete(r.id) is None
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.retrieve(r.id)
    assert err.value.body["param"] == "response_id"
    unstored = respond(client, store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    with pytest.raises(openai.BadRequestError) as err:
        respond(client, previous_response_id=unstored.id)
    assert err.value.body["param"] == "previous_response_id"


def test_the_store_drops_the_oldest_beyond_its_capacity():
    from foretell.server.responses import ResponseStore, Stored

    store = ResponseStore(capacity=2)
    for i in range(3):
        store.put(Stored({"id": f"r{i}"}, [], []))
    with pytest.raises(Exception):
        store.get("r0")
    assert store.get("r2").response == {"id": "r2"}


def test_input_items_list_back_what_was_sent(client):
    sent = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": [{"type": "input_text", "text": "a"}]},
            {"role": "assistant", "content": "b"}, {"role": "user", "content": PROMPT}]
    r = respond(client, input=sent)
    page = client.responses.input_items.list(r.id, order="asc")
    items = page.data
    assert [i.role for i in items] == ["developer", "user", "assistant", "user"]
    assert [i.content[0].text for i in items] == ["Be brief.", "a", "b", PROMPT]
    assert items[2].content[0].type == "output_text" and items[1].content[0].type == "input_text"
    assert len({i.id for i in items}) == 4 and all(i.id.startswith("msg_") for i in items)
    newest = client.responses.input_items.list(r.id, limit=2)  # desc by default
    assert [i.id for i in newest.data] == [items[3].id, items[2].id] and newest.has_more
    rest = client.responses.input_items.list(r.id, limit=2, after=items[2].id)
    assert [i.id for i in rest.data] == [items[1].id, items[0].id] and not rest.has_more
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.cancel(r.id)
    assert err.value.body["param"] == "response_id"
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list("resp_nope")


# -- input items ------------------------------------------------------------------------------------
def test_function_calls_join_the_assistant_turn_and_outputs_become_tool_messages():
    items = [InputItem.model_validate(x) for x in (
        {"role": "user", "content": "weather in Paris and Rome?"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city": "Rome"}'},
        {"type": "reasoning", "summary": []},
        {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "21 C"}]},
    )]
    messages = input_messages(items)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[1].content == "Checking." and [c.id for c in messages[1].tool_calls] == ["c1", "c2"]
    assert (messages[2].tool_call_id, messages[2].content) == ("c1", "18 C")
    assert (messages[3].tool_call_id, messages[3].content) == ("c2", "21 C")


def tool_client(output, tokenizer):
    http = TestClient(build_app(ToolEngine(output, tokenizer)))
    return openai.OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=http, max_retries=0)


def test_a_call_comes_back_as_a_function_call_item_and_its_result_continues(tools_tokenizer):
    client = tool_client(f"Checking.<tool_call>\n{CALL}\n</tool_call>", tools_tokenizer)
    r = client.responses.create(model="tiny-fake", input="weather?", tools=[WEATHER])
    message, call = r.output
    assert message.type == "message" and message.content[0].text == "Checking."
    assert call.type == "function_call" and call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id.startswith("call_") and r.status == "completed"
    with client.responses.stream(model="tiny-fake", input="weather?", tools=[WEATHER]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.done" in kinds and kinds[-1] == "response.completed"
    assert [o.type for o in final.output] == ["message", "function_call"]
    assert final.output[0].content[0].text == "Checking." and final.output[1].arguments == call.arguments
    # the result, continuing the stored response: the prompt holds the call and the tool's answer
    follow = client.responses.create(model="tiny-fake", previous_response_id=r.id, tools=[WEATHER],
                                     input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18 C"}])
    stateless = client.responses.create(model="tiny-fake", tools=[WEATHER], input=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": call.call_id, "name": "get_weather", "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "18 C"}])
    assert follow.usage.input_tokens == stateless.usage.input_tokens > r.usage.input_tokens


def test_tool_choice_none_and_a_named_function(tools_tokenizer):
    reply = f"<tool_call>\n{CALL}\n</tool_call>"
    client = tool_client(reply, tools_tokenizer)
    r = client.responses.create(model="tiny-fake", input="weather?", tools=[WEATHER], tool_choice="none")
    assert [o.type for o in r.output] == ["message"] and r.output_text == reply
    named = client.responses.create(model="tiny-fake", input="weather?", tools=[WEATHER],
                                    tool_choice={"type": "function", "name": "get_weather"})
    assert named.tool_choice.name == "get_weather"
    bad = {"type": "function", "name": "nope"}
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="tiny-fake", input="weather?", tools=[WEATHER], tool_choice=bad)
    assert err.value.body["param"] == "tool_choice"


# -- refusals ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("body,param", [
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0].type"),
    ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
    ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id"),
    ({"input": []}, "input"),
    ({"input": None}, "input"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"background": True}, "background"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"temperature": "hot"}, "temperature"),
    ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ({"extra_body": {"stop": ["a", "b", "c", "d", "e"]}}, "stop"),
    ({"extra_body": {"prediction": {"type": "content", "content": "x " * 400}}}, "prediction"),
    ({"input": "word " * 5000}, "input"),
    ({"max_output_tokens": 10 ** 7}, "max_output_tokens"),
])
def test_bad_input_gets_a_400_naming_the_field(client, body, param):
    with pytest.raises(openai.BadRequestError) as err:
        respond(client, **body)
    assert err.value.body["param"] == param, err.value.body
    assert err.value.body["type"] == "invalid_request_error"


def test_an_unknown_model_is_a_404(client):
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model="gpt-9", input="x")
    assert err.value.body["param"] == "model"


def test_the_request_fields_map_onto_chat():
    from foretell.server.responses import ResponsesRequest, to_chat

    req = ResponsesRequest.model_validate({
        "model": "m", "input": "hi", "instructions": "sys", "max_output_tokens": 7, "top_p": 0.5, "seed": 3,
        "tools": [WEATHER], "tool_choice": "required", "parallel_tool_calls": False,
        "text": {"format": {"type": "json_object"}}, "top_logprobs": 3,
    })
    chat_req, conversation = to_chat(req, [P.Message(role="user", content="before")])
    assert [m.role for m in chat_req.messages] == ["system", "user", "user"]
    assert [m.content for m in conversation] == ["before", "hi"]  # the instructions are not carried over
    assert (chat_req.max_completion_tokens, chat_req.top_p, chat_req.seed) == (7, 0.5, 3)
    assert chat_req.tools[0].function.name == "get_weather" and chat_req.tool_choice == "required"
    assert chat_req.parallel_tool_calls is False and chat_req.response_format == {"type": "json_object"}
    assert chat_req.logprobs is True and chat_req.top_logprobs == 3
