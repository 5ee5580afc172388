"""The playground's server side: the page and its static files at / (offline: nothing outside the package),
the opt-in per-chunk provenance extension (``stream_options.include_provenance``), and that plain OpenAI
clients still see standard chunks. The page itself runs in a browser in test_playground_browser.py."""

from __future__ import annotations

import json
import re

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

from foretell.engine.api import RequestOutput, RequestStats
from foretell.server import build_app
from foretell.server.app import STATIC_DIR
from foretell.engine.detok import _byte_decoder
from foretell.server.provenance import ProvenanceTape
from foretell.testing import make_tiny_tokenizer
from foretell.testing.serve import printable_tiny_engine, serve_in_thread

MSGS = [{"role": "user", "content": "Rename the class Snake to Serpent."}]


@pytest.fixture(scope="module")
def server():
    engine = printable_tiny_engine()
    try:
        with serve_in_thread(build_app(engine)) as url:
            yield url
    finally:
        engine.shutdown()


def sse(text: str) -> list[dict]:
    events = [e[len("data: "):] for e in text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def stream(url: str, **body) -> list[dict]:
    body = {"model": "default", "messages": MSGS, "max_tokens": 60, "temperature": 0, "stream": True, **body}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return sse(r.text)


def greedy(url: str, max_tokens: int = 60) -> str:
    body = {"model": "default", "messages": MSGS, "max_tokens": max_tokens, "temperature": 0}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    return r.json()["choices"][0]["message"]["content"]


# -- the page -------------------------------------------------------------------------------------
def test_root_serves_the_page_and_its_assets_without_a_key(server):
    page = httpx.get(server + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text)
    assert {"/static/playground.js", "/static/playground.css", "/static/diff.min.js"} <= set(assets)
    for path in assets + ["/static/examples.json"]:
        assert httpx.get(server + path).status_code == 200, path
    examples = httpx.get(server + "/static/examples.json").json()["examples"]
    assert {e["id"] for e in examples} == {"code", "json", "doc"}
    assert all(e["instruction"] and e["prediction"] for e in examples)


def test_static_files_load_nothing_from_outside():
    """Works offline: no URL with a scheme anywhere in the page, its script, style or the vendored diff."""
    for path in STATIC_DIR.iterdir():
        if path.suffix in {".html", ".js", ".css", ".json"}:
            assert "://" not in path.read_text(), path.name


class _Engine:
    """Just enough engine for the routes that do not generate."""

    def __init__(self):
        from foretell.config import EngineConfig

        self.tokenizer = make_tiny_tokenizer()
        self.model_name = "tiny-fake"
        self.max_model_len = 256
        self.config = EngineConfig(kv_budget_tokens=4096)

    def metrics(self) -> dict:
        return {}


def test_api_key_guards_v1_but_not_the_page():
    with TestClient(build_app(_Engine(), api_key="sekrit")) as c:
        assert c.get("/").status_code == 200
        assert c.get("/static/playground.js").status_code == 200
        assert c.get("/v1/models").status_code == 401
        r = c.get("/v1/models", headers={"Authorization": "Bearer sekrit"})
        assert r.json()["data"][0]["speculation_methods"] == ["auto", "none", "ngram", "prediction"]


def test_model_card_lists_the_engines_methods():
    engine = _Engine()
    engine.speculation_methods = ("auto", "none", "ngram", "prediction", "draft")
    with TestClient(build_app(engine)) as c:
        assert "draft" in c.get("/v1/models").json()["data"][0]["speculation_methods"]


# -- the provenance tape (the mapping from token flags to text spans) ----------------------------
def _output(ids: list[int], flags: list[bool]) -> RequestOutput:
    return RequestOutput("r", ids, "", flags, None, False, None, RequestStats())


def _byte_ids(tok, text: str) -> list[int]:
    """One token per UTF-8 byte of ``text`` (the byte-level alphabet), so a character spans tokens."""
    to_char = {b: c for c, b in _byte_decoder().items()}
    return [tok.convert_tokens_to_ids(to_char[b]) for b in text.encode()]


def _flags_by_char(spans: list[dict]) -> str:
    return "".join(("P" if s["from_prediction"] else "g") * len(s["text"]) for s in spans)


def test_tape_maps_token_flags_to_characters_across_cut_points():
    tok = make_tiny_tokenizer()
    tape = ProvenanceTape(tok)
    words = ["def", " add", "(a", ", b", "):"]
    flags = [True, True, False, True, False]
    ids = [tok.encode(w, add_special_tokens=False) for w in words]
    for word_ids, f in zip(ids, flags):
        tape.add(_output(word_ids, [f] * len(word_ids)))
    # the stream's deltas are cut elsewhere than the tokens (stop-string hold-back does that)
    deltas = ["de", "f ad", "d(a, ", "b):"]
    got = [tape.spans(d) for d in deltas]
    for d, spans in zip(deltas, got):
        assert "".join(s["text"] for s in spans) == d
    assert "".join(_flags_by_char(s) for s in got) == "PPP" + "PPPP" + "gg" + "PPP" + "gg"


def test_tape_character_split_across_tokens_needs_all_its_tokens_predicted():
    tok = make_tiny_tokenizer()
    snake = _byte_ids(tok, "🐍")  # four byte tokens make one character
    assert len(snake) == 4
    tape = ProvenanceTape(tok)
    tape.add(_output(snake, [True, True, False, True]))  # one byte token was generated
    tape.add(_output(snake, [True] * 4))
    a_ids = tok.encode("a", add_special_tokens=False)
    tape.add(_output(a_ids, [True]))
    assert _flags_by_char(tape.spans("🐍🐍a")) == "gPP"


# -- the extension end to end -------------------------------------------------------------------------
def test_provenance_spans_cover_each_chunk_and_mark_the_predicted_text(server):
    answer = greedy(server)
    events = stream(server, prediction={"type": "content", "content": answer},
                    stream_options={"include_usage": True, "include_provenance": True})
    content = [e for e in events if e["choices"] and e["choices"][0]["delta"].get("content")]
    assert content
    for e in content:
        ext = e["choices"][0]["foretell"]
        assert "".join(s["text"] for s in ext["spans"]) == e["choices"][0]["delta"]["content"]
    text = "".join(e["choices"][0]["delta"]["content"] for e in content)
    assert text == answer  # lossless, and the spans tile the whole answer
    predicted = sum(len(s["text"]) for e in content for s in e["choices"][0]["foretell"]["spans"] if s["from_prediction"])
    assert predicted >= len(answer) // 2
    usage, last = events[-1]["usage"], [e for e in events if e["choices"]][-1]["choices"][0]["foretell"]
    assert last["accepted_prediction_tokens"] == usage["completion_tokens_details"]["accepted_prediction_tokens"] > 0
    assert last["completion_tokens"] == usage["completion_tokens"]
    assert last["forward_passes"] == events[-1]["foretell"]["forward_passes"] < usage["completion_tokens"]


def test_without_a_prediction_nothing_is_marked(server):
    events = stream(server, stream_options={"include_provenance": True})
    spans = [s for e in events if e["choices"] for s in e["choices"][0].get("foretell", {}).get("spans", [])]
    assert spans and not any(s["from_prediction"] for s in spans)


def test_official_client_sees_standard_chunks_unless_it_asks(server):
    client = openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0, timeout=60)
    answer = greedy(server, 24)
    kw = dict(model="default", messages=MSGS, max_tokens=24, temperature=0, stream=True,
              prediction={"type": "content", "content": answer})
    plain = list(client.chat.completions.create(**kw))
    assert all(not c.choices or not c.choices[0].model_extra for c in plain)
    assert all(not c.model_extra for c in plain)  # no usage asked: no stats block either
    asked = list(client.chat.completions.create(**kw, stream_options={"include_provenance": True}))
    exts = [c.choices[0].model_extra["foretell"] for c in asked if c.choices and c.choices[0].delta.content]
    assert exts and any(s["from_prediction"] for x in exts for s in x["spans"])
    assert "".join(c.choices[0].delta.content or "" for c in asked if c.choices) == answer


def test_provenance_is_a_stream_option_only(server):
    body = {"model": "default", "messages": MSGS, "max_tokens": 4, "stream_options": {"include_provenance": True}}
    r = httpx.post(server + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "stream_options"
    body.update(stream=True, stream_options={"include_provenance": "yes"})
    r = httpx.post(server + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400 and "include_provenance" in r.json()["error"]["param"]


def test_completions_stream_carries_provenance_too(server):
    answer = httpx.post(server + "/v1/completions", json={"model": "default", "prompt": "def add", "max_tokens": 30,
                                                          "temperature": 0}, timeout=60).json()["choices"][0]["text"]
    body = {"model": "default", "prompt": "def add", "max_tokens": 30, "temperature": 0, "stream": True,
            "prediction": {"type": "content", "content": answer}, "stream_options": {"include_provenance": True}}
    events = sse(httpx.post(server + "/v1/completions", json=body, timeout=60).text)
    spans = [s for e in events if e["choices"] for s in e["choices"][0]["foretell"]["spans"]]
    assert "".join(s["text"] for s in spans) == answer and any(s["from_prediction"] for s in spans)


def test_each_choice_has_its_own_provenance(server):
    answer = greedy(server, 40)
    events = stream(server, n=2, max_tokens=40, prediction={"type": "content", "content": answer},
                    stream_options={"include_provenance": True})
    for index in (0, 1):
        chunks = [e["choices"][0] for e in events if e["choices"] and e["choices"][0]["index"] == index]
        spans = [s for c in chunks for s in c.get("foretell", {}).get("spans", [])]
        assert "".join(s["text"] for s in spans) == answer
        assert any(s["from_prediction"] for s in spans)
