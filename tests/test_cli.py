"""The ``foretell`` command: help texts, option mapping, bench delegation, ``generate`` and ``serve`` on the
tiny model (saved as an HF directory, the way a user passes ``--model PATH``)."""

from __future__ import annotations

import importlib.machinery
import queue
import re
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import httpx
import pytest

from foretell import cli
from foretell.testing import save_tiny_model_dir


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return save_tiny_model_dir(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FORETELL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.mark.parametrize("argv", [["--help"], ["serve", "--help"], ["generate", "--help"]])
def test_help(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: foretell" in out
    if argv[0] == "serve":
        for flag in ("--model", "--host", "--port", "--api-key", "--dtype", "--kv-budget-tokens", "--max-num-seqs",
                     "--max-queue", "--k-max", "--device", "--allowed-origins"):
            assert flag in out


def test_serve_options_map_to_engine_config():
    args = cli.build_parser().parse_args(
        ["serve", "--model", "m", "--dtype", "float32", "--device", "cpu", "--kv-budget-tokens", "4096",
         "--max-num-seqs", "2", "--max-queue", "3", "--k-max", "16"]
    )
    cfg = cli._engine_config(args)
    assert (cfg.model, cfg.dtype, cfg.device, cfg.kv_budget_tokens, cfg.max_num_seqs, cfg.max_queue, cfg.k_max) == (
        "m", "float32", "cpu", 4096, 2, 3, 16
    )
    assert (args.host, args.port, args.api_key) == ("127.0.0.1", 8000, None)
    assert cfg.prefix_cache is True
    assert cli._engine_config(cli.build_parser().parse_args(["serve", "--no-prefix-cache"])).prefix_cache is False
    assert (cfg.argmax_head, cfg.layer_glue) == (True, True)
    off = cli._engine_config(cli.build_parser().parse_args(["serve", "--no-argmax-head", "--no-layer-glue"]))
    assert (off.argmax_head, off.layer_glue) == (False, False)
    assert cfg.int8_linears is None  # auto: in fp32 without AMX (runner.int8_by_default, int8_dtype)
    assert cli._engine_config(cli.build_parser().parse_args(["serve", "--no-int8-linears"])).int8_linears is False
    assert cli._engine_config(cli.build_parser().parse_args(["serve", "--int8-linears"])).int8_linears is True


def test_exact_mode_is_the_engines_choice_unless_asked_either_way(capsys):
    parse = cli.build_parser().parse_args
    assert cli._engine_config(parse(["serve"])).exact is None
    assert cli._engine_config(parse(["serve", "--exact"])).exact is True
    assert cli._engine_config(parse(["serve", "--no-exact"])).exact is False
    with pytest.raises(SystemExit):
        parse(["serve", "--exact", "--no-exact"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_serve_loads_the_packaged_drafter_of_the_1_5b_unless_told_otherwise():
    """The issue's default: --model qwen2.5-coder-1.5b serves with the packaged 0.5B as draft model; an explicit
    --draft-model wins, 'none' serves without one, and other models get none by default."""
    parse = cli.build_parser().parse_args
    assert cli._engine_config(parse(["serve", "--model", "qwen2.5-coder-1.5b"])).draft_model == "qwen2.5-coder-0.5b"
    assert cli._engine_config(parse(["serve", "--model", "qwen2.5-coder-1.5b-instruct"])).draft_model == "qwen2.5-coder-0.5b"
    assert cli._engine_config(parse(["serve", "--model", "qwen2.5-coder-1.5b", "--draft-model", "none"])).draft_model is None
    assert cli._engine_config(parse(["serve", "--model", "qwen2.5-coder-1.5b", "--draft-model", "/m"])).draft_model == "/m"
    assert cli._engine_config(parse(["serve"])).draft_model is None
    assert cli._engine_config(parse(["serve", "--model", "/some/dir"])).draft_model is None


def test_bad_option_value_is_a_clear_error(capsys):
    assert cli.main(["serve", "--max-num-seqs", "0"]) == 2
    assert "--max-num-seqs" in capsys.readouterr().err


def test_int8_linears_with_a_bf16_model_is_a_clear_error(capsys, tiny_dir):
    """The int8 route computes in fp32: asked for with bf16 weights, start-up stops with one line naming the field
    (it crashed with a traceback in the first prompt chunk before)."""
    argv = ["generate", "hi", "--model", str(tiny_dir), "--dtype", "bfloat16", "--device", "cpu", "--int8-linears"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "int8_linears" in err and "float32" in err and "Traceback" not in err


def test_bench_delegates(monkeypatch):
    seen = []
    fake = types.ModuleType("foretell.bench.cli")
    fake.__spec__ = importlib.machinery.ModuleSpec("foretell.bench.cli", None)
    fake.main = lambda args: seen.append(args) or 0
    monkeypatch.setitem(sys.modules, "foretell.bench.cli", fake)
    assert cli.main(["bench", "--quick", "-n", "3"]) == 0
    assert seen == [["--quick", "-n", "3"]]


def test_bench_not_built(monkeypatch, capsys):
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    assert cli.main(["bench"]) == 1
    assert "not built yet" in capsys.readouterr().err


def _generate(capsys, tiny_dir, *extra) -> tuple[str, str]:
    argv = ["generate", "def add(a, b):", "--model", str(tiny_dir), "--dtype", "float32", "--device", "cpu",
            "--max-tokens", "24", *extra]
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    return out.out, out.err


def hf_reference(tiny_dir: Path, messages: list[dict], max_new: int = 24) -> str:
    """The answer transformers' own ``generate`` gives (greedy, fp32): independent of foretell's engine."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32).eval()
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=max_new, do_sample=False, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.eos_token_id)
    return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def test_generate_with_prediction_is_lossless_and_shows_accepted(capsys, tiny_dir, tmp_path, monkeypatch):
    # the default cost curve instead of one measured on a busy test machine, so drafts are always tried
    real = cli._engine_config
    monkeypatch.setattr(cli, "_engine_config", lambda args, **kw: real(args, measure_cost_curve=False, **kw))
    plain, err = _generate(capsys, tiny_dir)
    assert plain == hf_reference(tiny_dir, [{"role": "user", "content": "def add(a, b):"}]) + "\n"
    assert "24 tokens" in err and "forward passes" in err
    pred = tmp_path / "pred.txt"
    pred.write_text(plain.rstrip("\n"))
    same, err = _generate(capsys, tiny_dir, "--prediction-file", str(pred))
    accepted = int(re.search(r"(\d+) from the prediction", err).group(1))
    assert same == plain and accepted > 0
    shown, _ = _generate(capsys, tiny_dir, "--prediction-file", str(pred), "--show")
    assert cli.ACCEPTED in shown
    assert shown.replace(cli.ACCEPTED, "").replace(cli.RESET, "") == plain


def test_generate_messages_file_and_errors(capsys, tiny_dir, tmp_path):
    msgs = tmp_path / "m.json"
    msgs.write_text('[{"role": "user", "content": "hi"}]')
    out, _ = _generate(capsys, tiny_dir, "--messages", str(msgs), "--system", "be brief")
    expected = hf_reference(tiny_dir, [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert out == expected + "\n" and expected
    msgs.write_text('{"not": "a list"}')
    assert cli.main(["generate", "--messages", str(msgs), "--model", str(tiny_dir)]) == 2
    assert "list" in capsys.readouterr().err


def test_serve_subprocess_prints_url_and_serves(tiny_dir, tmp_path):
    cmd = [sys.executable, "-m", "foretell.cli", "serve", "--model", str(tiny_dir), "--dtype", "float32",
           "--port", "0", "--api-key", "k", "--allowed-origins", "https://a.example, https://b.example"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = wait_for_url(proc, timeout_s=120)
        assert url.startswith("http://127.0.0.1:")
        headers = {"Authorization": "Bearer k"}
        r = httpx.post(url + "/v1/chat/completions", headers=headers, timeout=60,
                       json={"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                             "temperature": 0})
        assert r.status_code == 200, r.text
        # greedy: the tiny model does not stop that early (sampled at OpenAI's default temperature it once did)
        assert r.json()["usage"]["completion_tokens"] == 4
        assert httpx.get(url + "/v1/models", timeout=10).status_code == 401  # --api-key is enforced
        cors = httpx.get(url + "/health", headers={"Origin": "https://b.example"}, timeout=10)  # --allowed-origins
        assert cors.headers["access-control-allow-origin"] == "https://b.example"
    finally:
        stop(proc)


def wait_for_url(proc: subprocess.Popen, timeout_s: float) -> str:
    """Read the server's output (on a thread, so a silent server cannot block us past the deadline) until
    it prints where it listens; then wait for /health."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout], daemon=True).start()
    deadline, seen, url = time.monotonic() + timeout_s, [], None
    while url is None and time.monotonic() < deadline and proc.poll() is None:
        try:
            seen.append(lines.get(timeout=0.5))
        except queue.Empty:
            continue
        m = re.search(r"serving .* on (http://127\.0\.0\.1:\d+)", seen[-1])
        url = m.group(1) if m else None
    while url is not None and time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"server did not come up (exit code {proc.poll()}):\n" + "".join(seen[-40:]))


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
