"""Tool calls: the reply parser and stream filter, the prompt the template renders, and the HTTP layer (a fake
engine that writes a call). The default model writing real calls through the official client is in
test_server_realmodel."""

from __future__ import annotations

import copy
import json

import pytest
from fastapi.testclient import TestClient

from foretell.server import build_app
from foretell.server import protocol as P
from foretell.server.tools import StreamFilter, ToolChoice, could_be_bare, parse
from foretell.testing import make_tiny_tokenizer
from test_server_app import FakeEngine, sse_events

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
# the shape of Qwen2.5's template, compact: tools in the system turn, calls and tool results in the history
TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools><|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{\"name\": \"{{ c.function.name }}\", \"arguments\": "
    "{{ c.function.arguments | tojson }}}</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def choice(mode="auto", name=None, parallel=True):
    return ToolChoice((WEATHER,), mode, name, parallel)


# -- the parser -------------------------------------------------------------------------------------
def test_a_tagged_call_parses_with_the_text_before_it_as_content():
    parsed = parse(f"Let me look.\n<tool_call>\n{CALL}\n</tool_call>", choice())
    assert parsed.content == "Let me look.\n"
    (call,) = parsed.calls
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert call["type"] == "function" and call["id"].startswith("call_")


def test_parallel_calls_and_parallel_tool_calls_false():
    text = f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{CALL.replace('Paris', 'Rome')}\n</tool_call>"
    calls = parse(text, choice()).calls
    assert [json.loads(c["function"]["arguments"])["city"] for c in calls] == ["Paris", "Rome"]
    assert [c["index"] for c in calls] == [0, 1] and calls[0]["id"] != calls[1]["id"]
    assert len(parse(text, choice(parallel=False)).calls) == 1


def test_text_without_a_call_is_text():
    assert parse("It is sunny in Paris.", choice()) is None
    assert parse("<tool_call>\nnot json\n</tool_call>", choice()) is None  # an unreadable block: the reply is text
    assert parse('{"name": "other_tool", "arguments": {}}', choice()) is None  # bare JSON naming no tool
    assert parse('{"city": "Paris"}', choice()) is None
    assert parse(CALL, choice("required")) is None  # "required" opens with the tag; bare JSON is not read then


def test_a_bare_call_is_read_in_auto_mode_bare_or_fenced():
    for text in (CALL, f"  {CALL}\n", f"```json\n{CALL}\n```", f"```\n{CALL}\n```"):
        parsed = parse(text, choice())
        assert parsed is not None and parsed.content is None, text
        assert parsed.calls[0]["function"]["name"] == "get_weather"


def test_a_forced_named_call_with_invalid_arguments_keeps_them_as_written():
    opening = choice("named", "get_weather").opening()
    parsed = parse(opening + '{"city": Paris}}\n</tool_call>', choice("named", "get_weather"))
    assert parsed.calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": Paris}'}


def test_a_call_cut_by_the_token_limit_still_parses_if_its_json_is_whole():
    assert parse(f"<tool_call>\n{CALL}", choice()).calls[0]["function"]["name"] == "get_weather"
    assert parse('<tool_call>\n{"name": "get_weather", "argum', choice()) is None


# -- the stream filter ------------------------------------------------------------------------------
def feed_chars(f: StreamFilter, text: str) -> str:
    return "".join(f.feed(ch) for ch in text)


def test_the_stream_sends_text_up_to_the_tag_and_keeps_the_call():
    f = StreamFilter(choice())
    sent = feed_chars(f, f"Let me look. <tool_call>\n{CALL}\n</tool_call>")
    rest, parsed = f.finish()
    assert sent == "Let me look. " and rest == ""
    assert parsed.content == "Let me look. " and parsed.calls[0]["function"]["name"] == "get_weather"


def test_the_stream_releases_text_that_only_looked_like_a_tag_or_a_call():
    f = StreamFilter(choice())
    sent = feed_chars(f, "a <toolbox> b <tool")
    rest, parsed = f.finish()
    assert parsed is None and sent + rest == "a <toolbox> b <tool"
    f = StreamFilter(choice())
    sent = feed_chars(f, '{"city": "Paris"} is JSON')  # held while it may be a bare call, then released
    rest, parsed = f.finish()
    assert parsed is None and sent + rest == '{"city": "Paris"} is JSON'


def test_the_stream_does_not_hold_a_code_reply():
    f = StreamFilter(choice())
    assert feed_chars(f, "```python\ndef f():\n") == "```python\ndef f():\n"


def test_could_be_bare():
    assert all(map(could_be_bare, ["", "  ", "{", '{"na', "`", "```", "```js", "```json\n", "```json\n {", "```\n"]))
    assert not any(map(could_be_bare, ["Sure", "```python\n", "```\nimport", "```json\nx"]))


def test_a_forced_call_is_held_from_the_start():
    f = StreamFilter(choice("required"))
    assert feed_chars(f, 'get_weather", "arguments": {"city": "Paris"}}\n</tool_call>') == ""
    rest, parsed = f.finish()
    assert rest == "" and parsed.calls[0]["function"]["arguments"] == '{"city": "Paris"}'


# -- the prompt -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tools_tokenizer():
    tok = copy.deepcopy(make_tiny_tokenizer())
    tok.chat_template = TOOLS_TEMPLATE
    return tok


def request(**body):
    body = {"model": "m", "messages": [{"role": "user", "content": "weather?"}], "tools": [WEATHER], **body}
    return P.ChatCompletionRequest.model_validate(body)


def prompt_text(tok, req) -> str:
    return tok.decode(P.chat_prompt_ids(tok, req.messages, P.tool_choice(req)))


def test_the_template_gets_the_tools_unless_tool_choice_is_none(tools_tokenizer):
    assert '"name": "get_weather"' in prompt_text(tools_tokenizer, request())
    assert "get_weather" not in prompt_text(tools_tokenizer, request(tool_choice="none"))


def test_a_forced_call_opens_the_assistant_turn(tools_tokenizer):
    text = prompt_text(tools_tokenizer, request(tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    assert text.endswith('assistant\n<tool_call>\n{"name": "get_weather", "arguments": ')
    assert prompt_text(tools_tokenizer, request(tool_choice="required")).endswith('assistant\n<tool_call>\n{"name": "')


def test_history_calls_render_their_arguments_as_an_object_and_tool_results_as_messages(tools_tokenizer):
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
    ]
    text = prompt_text(tools_tokenizer, request(messages=history))
    assert '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>' in text  # not a quoted string
    assert "<|im_start|>tool\n18 C<|im_end|>" in text


# -- the HTTP layer ---------------------------------------------------------------------------------
class ToolEngine(FakeEngine):
    """The fake engine with a tools template, writing ``output``."""

    def __init__(self, output: str, tokenizer):
        super().__init__(max_model_len=4096, max_prediction_tokens=4096)
        self.tokenizer = tokenizer
        self.output_ids = tokenizer.encode(output, add_special_tokens=False) + [tokenizer.eos_token_id]


def serve(output, tokenizer):
    return TestClient(build_app(ToolEngine(output, tokenizer)))


def post(client, **body):
    body = {"model": "tiny-fake", "messages": [{"role": "user", "content": "weather?"}], "tools": [WEATHER], **body}
    return client.post("/v1/chat/completions", json=body)


def streamed(client, **body):
    r = post(client, stream=True, **body)
    assert r.status_code == 200, r.text
    content, calls, finish = "", [], None
    for ev in sse_events(r.text):
        for c in ev["choices"]:
            content += c["delta"].get("content") or ""
            calls += c["delta"].get("tool_calls") or []
            finish = c["finish_reason"] or finish
    return content, calls, finish


def test_a_reply_with_a_call_comes_back_as_tool_calls(tools_tokenizer):
    with serve(f"Checking.<tool_call>\n{CALL}\n</tool_call>", tools_tokenizer) as client:
        r = post(client)
        assert r.status_code == 200, r.text
        choice0 = r.json()["choices"][0]
        assert choice0["finish_reason"] == "tool_calls"
        assert choice0["message"]["content"] == "Checking."
        (call,) = choice0["message"]["tool_calls"]
        assert call["type"] == "function" and call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
        content, calls, finish = streamed(client)
        assert content == "Checking." and finish == "tool_calls"
        assert [c["function"] for c in calls] == [call["function"]] and calls[0]["index"] == 0


def test_without_tools_or_with_tool_choice_none_the_same_reply_is_text(tools_tokenizer):
    reply = f"<tool_call>\n{CALL}\n</tool_call>"
    with serve(reply, tools_tokenizer) as client:
        for body in ({"tools": None}, {"tool_choice": "none"}):
            r = post(client, **body)
            message = r.json()["choices"][0]["message"]
            assert message["content"] == reply and "tool_calls" not in message, body
            assert r.json()["choices"][0]["finish_reason"] == "stop"
            assert streamed(client, **body) == (reply, [], "stop")


def test_a_text_reply_with_tools_streams_as_text(tools_tokenizer):
    reply = "It is sunny."
    with serve(reply, tools_tokenizer) as client:
        r = post(client)
        assert r.json()["choices"][0]["message"] == {"role": "assistant", "content": reply, "refusal": None}
        assert streamed(client) == (reply, [], "stop")


def test_a_prediction_beside_tools_keeps_its_usage(tools_tokenizer):
    with serve(f"<tool_call>\n{CALL}\n</tool_call>", tools_tokenizer) as client:
        r = post(client, prediction={"type": "content", "content": f"<tool_call>\n{CALL}"})
        details = r.json()["usage"]["completion_tokens_details"]
        assert details["accepted_prediction_tokens"] > 0 and r.json()["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("body,param", [
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": None, "tool_choice": "required"}, "tool_choice"),
    ({"tools": [{"type": "function"}]}, "tools[0].function"),
    ({"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, "tools[0].type"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}, "messages[0].tool_calls"),
])
def test_bad_tool_fields_are_400_naming_the_field(tools_tokenizer, body, param):
    with serve("x", tools_tokenizer) as client:
        r = post(client, **body)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"].startswith(param), r.json()


def test_a_template_that_cannot_render_tools_is_a_400():
    with TestClient(build_app(FakeEngine())) as client:  # the tiny template ignores tools
        r = post(client)
        assert r.status_code == 400 and r.json()["error"]["param"] == "tools"
