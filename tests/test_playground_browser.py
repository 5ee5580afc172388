"""The playground in a real browser: headless Chromium from the system's packages (Debian's ``chromium``),
driven by Playwright for Python with ``executable_path`` set to it (no browser is ever downloaded), against
the real server on the tiny model (``printable_tiny_engine``: deterministic greedy answers).

The page loads with every request outside the server blocked (it works offline), runs the code-edit
example from the keyboard with a prediction made of the model's own answer plus an edit, and must show the
answer in both panes (the same text), highlighted spans only on the side with the prediction, fewer
forward passes there, the stats and the speedup, and a diff against the prediction. Screenshots (desktop
and a 390 px phone) are saved under ``$FORETELL_ARTIFACTS`` (default ``tmp/artifacts`` in the checkout).

Without Chromium or Playwright the test skips, loudly; with ``FORETELL_REQUIRE_BROWSER=1`` (set by
``.ci/run`` once it has installed Chromium) it fails instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from foretell.server import build_app
from foretell.server.app import STATIC_DIR
from foretell.testing.serve import printable_tiny_engine, serve_in_thread

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
MAX_TOKENS = 80
EDIT = "\n# a line the model will not write\n"
ROOT = Path(__file__).resolve().parent.parent


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _skip_loudly(reason: str) -> None:
    message = f"PLAYGROUND BROWSER TEST NOT RUN: {reason}"
    if os.environ.get("FORETELL_REQUIRE_BROWSER") == "1":
        pytest.fail(message + " (FORETELL_REQUIRE_BROWSER=1)")
    warnings.warn(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser_tools():
    chromium = _chromium()
    if chromium is None:
        _skip_loudly("no system Chromium (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_loudly("Playwright for Python is not installed (pip install playwright; never 'playwright install')")
    return chromium, sync_playwright


@pytest.fixture(scope="module")
def server():
    engine = printable_tiny_engine()
    try:
        with serve_in_thread(build_app(engine)) as url:
            yield url
    finally:
        engine.shutdown()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    path = Path(os.environ.get("FORETELL_ARTIFACTS") or ROOT / "tmp" / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _code_example() -> dict:
    examples = json.loads((STATIC_DIR / "examples.json").read_text())["examples"]
    return next(e for e in examples if e["id"] == "code")


def _answer(url: str, instruction: str) -> str:
    """The model's greedy answer to the instruction alone (the page sends the same request)."""
    body = {"model": "default", "messages": [{"role": "user", "content": instruction}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "top_p": 1, "seed": 0}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def _int(text: str) -> int:
    assert re.fullmatch(r"\d+", text), f"not a count: {text!r}"
    return int(text)


def test_playground_runs_an_example_in_chromium(browser_tools, server, artifacts, tmp_path, capsys):
    chromium, sync_playwright = browser_tools
    example = _code_example()
    answer = _answer(server, example["instruction"])
    half = len(answer) // 2
    prediction = answer[:half] + EDIT + answer[half:]
    own = urlparse(server).netloc
    blocked, errors, posts = [], [], []

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=chromium, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            def only_the_server(route):
                if urlparse(route.request.url).netloc == own:
                    return route.continue_()
                blocked.append(route.request.url)
                return route.abort()

            context.route("**/*", only_the_server)
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: posts.append(json.loads(r.post_data)) if r.method == "POST" else None)
            page.goto(server + "/")
            page.wait_for_selector("#server-status[data-state=ok]")
            assert page.locator("#method option").evaluate_all("os => os.map(o => o.value)") == [
                "auto", "prediction", "ngram", "none"]  # no draft / cascade: this server has none

            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.className") == "skip"
            page.get_by_role("button", name="Code edit").click()
            assert page.locator("#instruction").input_value() == example["instruction"]
            page.locator("#include-doc").uncheck()
            page.locator("#prediction").fill(prediction)
            page.locator("#max-tokens").fill(str(MAX_TOKENS))
            page.locator("#instruction").focus()
            page.keyboard.press("Control+Enter")
            page.wait_for_selector("#summary[data-state=done]", timeout=120_000)

            with_pane, without = page.locator("#pane-with"), page.locator("#pane-without")
            assert with_pane.locator(".out").text_content() == answer
            assert without.locator(".out").text_content() == answer
            assert with_pane.locator("mark.pred").count() > 0
            assert without.locator("mark.pred").count() == 0
            marked = "".join(with_pane.locator("mark.pred").all_text_contents())
            assert 0 < len(marked) < len(answer)

            def stat(pane, key):
                return pane.locator(f"dd[data-stat={key}]").text_content()

            passes_with, passes_without = _int(stat(with_pane, "passes")), _int(stat(without, "passes"))
            assert passes_with < passes_without
            assert _int(stat(with_pane, "accepted")) > 0 and _int(stat(with_pane, "rejected")) > 0
            assert _int(stat(without, "accepted")) == 0
            assert re.search(r"prediction \d+ / \d+", with_pane.locator(".sources").text_content())
            assert without.locator(".sources").text_content() == "No draft tokens proposed."  # plain decoding
            assert _int(stat(with_pane, "tokens")) == _int(stat(without, "tokens")) == MAX_TOKENS
            for pane in (with_pane, without):
                assert re.fullmatch(r"\d+\.\d s|\d+\.\d\d s", stat(pane, "wall"))
                assert re.fullmatch(r"\d+\.\d", stat(pane, "tps"))
            assert re.fullmatch(r"\d+\.\d\d×", page.locator("#speedup").text_content())
            assert page.locator("#same").text_content() == "yes ✓"
            assert EDIT.strip() in "".join(page.locator("#diff del").all_text_contents())

            warmed, sent_with, sent_without = posts  # the prompt cache is warmed first (one token)
            assert warmed["max_tokens"] == 1 and not warmed["stream"] and warmed["messages"] == sent_with["messages"]
            assert sent_with["prediction"] == {"type": "content", "content": prediction}
            assert sent_with["stream_options"] == {"include_usage": True, "include_provenance": True}
            assert sent_with["speculation"] == {"method": "auto"} and sent_without["speculation"] == {"method": "none"}
            assert "prediction" not in sent_without

            desktop = artifacts / "playground-desktop.png"
            page.screenshot(path=str(desktop), full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})
            assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing runs off a phone
            phone = artifacts / "playground-phone.png"
            page.screenshot(path=str(phone), full_page=True)
        finally:
            context.close()
    with capsys.disabled():
        print(f"\nplayground screenshots: {desktop} {phone}")
    assert not blocked, f"the page tried to load from outside the server: {blocked}"
    assert not errors, f"console errors: {errors}"
