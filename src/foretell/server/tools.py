"""Tool calls (OpenAI's ``tools`` / ``tool_choice``) for models whose chat template renders tools the Hermes way.

The template (Qwen2.5's, among others) lists the tools in the system turn and asks the model to answer a call as

    <tool_call>
    {"name": <function-name>, "arguments": <args-json-object>}
    </tool_call>

foretell renders the tools with the template, lets the model write, and reads such blocks back into OpenAI's
``message.tool_calls`` (``finish_reason: "tool_calls"``). Decoding is not constrained:

- ``tool_choice: "auto"`` (the default with tools): the model decides; text before the first block is the content.
  Small models sometimes answer with the call's JSON alone, without the tags (Qwen2.5-Coder-0.5B does for "What's
  the weather in Paris?"): a reply that is nothing but such an object (or one in a code fence), naming one of
  the tools, is read as a call too.
- ``"none"``: the tools are left out of the prompt and the reply is text.
- ``"required"`` / a named function: the assistant turn is opened with the block's start (``<tool_call>`` and,
  for a named function, ``{"name": ..., "arguments": ``), so the model continues a call. Arguments the model
  leaves as invalid JSON come back as written (OpenAI: "validate the arguments in your code").

Predictions work as with text: the prediction is compared with what the model writes after the opening.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


@dataclass(frozen=True)
class ToolChoice:
    """What the request asked: ``tools`` as the template takes them, and who chooses (see the module docstring)."""

    tools: tuple[dict, ...] = ()
    mode: str = "none"  # "none" | "auto" | "required" | "named"
    name: str | None = None  # the function a "named" choice forces
    parallel: bool = True

    @property
    def active(self) -> bool:
        return bool(self.tools) and self.mode != "none"

    def opening(self) -> str:
        """Text that opens the assistant turn (the model continues it): "" unless a call is forced."""
        if self.mode == "required":
            return OPEN + '\n{"name": "'
        if self.mode == "named":
            return OPEN + "\n" + '{"name": ' + json.dumps(self.name) + ', "arguments": '
        return ""


@dataclass
class Parsed:
    content: str | None
    calls: list[dict]  # OpenAI's tool_calls entries (id, type, function {name, arguments})


def _call(obj: Any, parallel_index: int) -> dict | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return {"index": parallel_index, "id": "call_" + uuid.uuid4().hex[:24], "type": "function",
            "function": {"name": obj["name"], "arguments": arguments}}


def _forced_call(body: str, choice: ToolChoice) -> dict | None:
    """A block that does not parse as JSON, when a named function was forced: the arguments as written."""
    if choice.mode != "named":
        return None
    head = '{"name": ' + json.dumps(choice.name) + ', "arguments": '
    if not body.startswith(head):
        return None
    rest = body[len(head):].rstrip()
    rest = rest[:-1].rstrip() if rest.endswith("}") else rest  # the outer object's brace
    return {"index": 0, "id": "call_" + uuid.uuid4().hex[:24], "type": "function",
            "function": {"name": choice.name, "arguments": rest}}


def _bare_call(text: str, choice: ToolChoice) -> Parsed | None:
    """A reply that is only a call's JSON object (maybe in a code fence) naming one of the tools."""
    fenced = FENCE.fullmatch(text.strip())
    body = fenced.group(1) if fenced else text.strip()
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    names = {t["function"]["name"] for t in choice.tools}
    if not isinstance(obj, dict) or obj.get("name") not in names or "arguments" not in obj:
        return None
    call = _call(obj, 0)
    return Parsed(None, [call]) if call is not None else None


def could_be_bare(text: str) -> bool:
    """Whether a reply so far may still turn out to be a bare call: nothing but space yet, an opening ``{``, or
    a code fence (plain or ``json``) that is empty so far or opens with ``{``."""
    head = text.lstrip()
    if not head or head[0] == "{":
        return True
    if not head.startswith("```"):
        return "```".startswith(head)
    after = head[3:]
    if "json".startswith(after):
        return True
    opened = re.match(r"(?:json)?[ \t]*\n\s*", after)
    if opened is None:
        return False
    rest = after[opened.end():]
    return rest == "" or rest[0] == "{"


def parse(text: str, choice: ToolChoice) -> Parsed | None:
    """The tool calls in a reply (``text``: the opening plus what the model wrote), or None if it made none
    that parse (then the reply is text). Blocks must close with ``</tool_call>`` unless the reply ends inside
    the last one; text between or after blocks is dropped (content is the text before the first, as streamed,
    None if only space)."""
    start = text.find(OPEN)
    if start < 0:
        return _bare_call(text, choice) if choice.mode == "auto" else None
    content = text[:start] if text[:start].strip() else None  # as streamed
    calls: list[dict] = []
    pos = start
    while pos >= 0:
        end = text.find(CLOSE, pos)
        body = text[pos + len(OPEN):end if end >= 0 else len(text)].strip()
        try:
            call = _call(json.loads(body), len(calls))
        except ValueError:
            call = _forced_call(body, choice) if not calls else None
        if call is not None:
            calls.append(call)
        if end < 0:
            break
        pos = text.find(OPEN, end)
    if not calls:
        return None
    if not choice.parallel:
        calls = calls[:1]
    return Parsed(content, calls)


@dataclass
class StreamFilter:
    """Holds a streamed choice's text back from where a tool call may begin: text before ``<tool_call>`` goes
    out as content (less a tail that could be the tag's start); from the tag on (or from the first token when
    a call is forced) the text is kept for :func:`parse` at the end. With ``"auto"``, a reply that may still be
    a bare call (:func:`could_be_bare`) is held too, until it is not."""

    choice: ToolChoice
    text: str = field(init=False)  # all text so far, the opening included
    sent: int = field(init=False)  # characters of text sent as content (or taken by the opening)
    holding: bool = field(init=False)  # inside a call: nothing more goes out until the end
    bare: bool = field(init=False)  # the reply may still be a call's JSON alone

    def __post_init__(self) -> None:
        self.text = self.choice.opening()
        self.sent = len(self.text)
        self.holding = bool(self.text)
        self.bare = self.choice.mode == "auto"

    def feed(self, delta: str) -> str:
        """The content to send now for ``delta``."""
        self.text += delta
        if self.holding:
            return ""
        if self.bare:
            if could_be_bare(self.text):
                return ""
            self.bare = False
        at = self.text.find(OPEN, self.sent)
        if at >= 0:
            self.holding = True
            out, self.sent = self.text[self.sent:at], at
            return out if self.text[:at].strip() else ""  # space alone before a call is no content
        end = max(self.sent, len(self.text) - _partial_tag(self.text))
        out, self.sent = self.text[self.sent:end], end
        return out

    def finish(self) -> tuple[str, Parsed | None]:
        """At the end: the content still to send and the calls (None: the rest was text after all)."""
        parsed = parse(self.text, self.choice) if self.holding or self.bare else None
        rest = "" if parsed is not None else self.text[self.sent:]
        self.sent = len(self.text)
        return rest, parsed


def _partial_tag(text: str) -> int:
    """How many characters at the end of ``text`` could begin ``<tool_call>``."""
    for n in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-n:]):
            return n
    return 0
