"""The ``foretell`` command: ``serve`` (OpenAI-compatible server), ``generate`` (one completion, with stats
and optional colouring of tokens accepted from the prediction) and ``bench``."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
from pathlib import Path

from foretell import __version__

ACCEPTED = "\x1b[32m"  # green: a token accepted from the prediction
RESET = "\x1b[0m"


# -- shared options ---------------------------------------------------------------------------------
def _add_model_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument(
        "--model",
        default=None,
        help="packaged model name (qwen2.5-coder-0.5b = default, qwen2.5-coder-1.5b), HF model directory or .gguf file",
    )
    g.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"],
                   help="weights dtype (default: auto: bf16 on CUDA and on CPUs with native bf16, else fp32; fp32 for "
                   "a model converted from a GGUF on a CPU with AVX512-BF16 and no AMX, where exact mode's int8 route "
                   "is faster)")
    g.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    g.add_argument("--max-model-len", type=int, default=None, help="context length (default: the model's, at most 32768)")
    exact = g.add_mutually_exclusive_group()
    exact.add_argument("--exact", dest="exact", action="store_const", const=True, default=None,
                       help="batch-invariant numerics: outputs bit-identical with and without a prediction in any "
                       "dtype (bf16 included). Default: on where a CPU runs foretell's kernels (not for bf16 with "
                       "AMX), off on a GPU, where it makes verify passes much slower (docs/EXACT.md)")
    exact.add_argument("--no-exact", dest="exact", action="store_const", const=False,
                       help="turn exact mode off where it would be on by default")
    g.add_argument("--no-argmax-head", dest="argmax_head", action="store_false", default=True,
                   help="exact mode on a CPU: do not keep the output head's int8 copy (132 MB on the 0.5B) from which "
                   "passes of greedy requests without logprobs take their argmax, computing exactly only the logits "
                   "that can be the largest (the same tokens; plain decoding ~0.87x the time on AMX)")
    g.add_argument("--no-layer-glue", dest="layer_glue", action="store_false", default=True,
                   help="exact mode on a CPU (bf16 with AVX-512, or fp32): run the RMSNorms, SiLU MLP activations and "
                   "rotary embeddings as torch's modules do instead of foretell's kernel (which fuses each into one "
                   "call and each residual addition into the next norm: one-token passes ~0.9x the time; a few values "
                   "may differ in the last bit, so a near-tie may decode differently than with the flag)")
    int8 = g.add_mutually_exclusive_group()
    int8.add_argument("--int8-linears", dest="int8_linears", action="store_const", const=True, default=None,
                      help="exact mode on a CPU with AVX512-VNNI or AVX2: linear layers converted from GGUF blocks "
                      "(Q5_0, Q8_0, Q4_K, Q6_K) compute decode and verify rows as llama.cpp does, with int8 inputs and "
                      "exact int32 sums (fewer bytes read; not the bf16 model's values). Default: on without AMX (fp32 "
                      "exact mode); with --dtype auto a CPU with AVX512-BF16 and no AMX loads such a model in fp32 "
                      "for it. With AMX: plain decoding ~2.3x as fast, long verify passes dearer than bf16 tiles "
                      "(edits with a prediction about as fast): for replies mostly new text")
    int8.add_argument("--no-int8-linears", dest="int8_linears", action="store_const", const=False,
                      help="keep the bf16 weights' route where int8 products would be on by default")
    g.add_argument("--no-int8-panels", dest="int8_panels", action="store_false", default=True,
                   help="int8 linear layers: keep the GGUF blocks and decode and verify on their own kernel instead of "
                   "laying the blocks out once as panels for the many-row kernel (default: panels, every pass on one "
                   "kernel; one-token passes ~0.8x, 64-token passes ~0.55x the time on a Cascade Lake Xeon)")
    g.add_argument("--cpu-linears", default="dispatch", choices=["dispatch", "lean", "packed"],
                   help="fp32 on a CPU: 'dispatch' (default) runs each linear call on MKL or foretell's small-pass "
                   "GEMM (oneDNN packed weights where it cannot be built), whichever start-up measured faster for "
                   "its size; the GEMM reads a bf16 copy where the weights are exactly bf16 (the packaged models); "
                   "'lean' keeps only that copy (MKL widens it per call: prefill ~6%% slower, ~1.4 GB less on the "
                   "0.5B); 'packed' runs oneDNN packed weights everywhere")


def _engine_config(args: argparse.Namespace, **overrides):
    from foretell.config import EngineConfig

    fields = dict(model=args.model, dtype=args.dtype, device=args.device, max_model_len=args.max_model_len,
                  exact=getattr(args, "exact", None), cpu_linears=getattr(args, "cpu_linears", "dispatch"),
                  argmax_head=getattr(args, "argmax_head", True), layer_glue=getattr(args, "layer_glue", True),
                  int8_linears=getattr(args, "int8_linears", None), int8_panels=getattr(args, "int8_panels", True))
    for name in ("kv_budget_tokens", "max_num_seqs", "max_queue", "k_max", "trace_path", "draft_model", "draft_k",
                 "prefix_cache"):
        value = getattr(args, name, None)
        if value is not None:
            fields[name] = value
    if getattr(args, "command", None) == "serve":
        fields["draft_model"] = _draft_model(args)
    fields.update(overrides)
    return EngineConfig(**fields)


def _draft_model(args: argparse.Namespace) -> str | None:
    """``--draft-model``: as given, None for 'none', and when absent the packaged model's default drafter."""
    from foretell.models.registry import default_drafter

    if args.draft_model is None:
        return default_drafter(args.model)
    return None if args.draft_model.strip().lower() == "none" else args.draft_model


class LoadError(Exception):
    """The model could not be loaded (missing, unsafe format, unsupported architecture): a clear message."""


def _load_engine(config):
    from foretell.config import ConfigError
    from foretell.engine.async_engine import AsyncEngine
    from foretell.engine.runner import ExactModeUnavailable, UnsupportedModelError
    from foretell.models.default_model import ModelError

    try:
        return AsyncEngine.from_config(config)
    except (ModelError, UnsupportedModelError, ExactModeUnavailable, ConfigError) as exc:
        raise LoadError(str(exc)) from exc


def _exact_line(exact: bool) -> str:
    if exact:
        return "exact mode on: outputs are bit-identical with and without a prediction (--no-exact: off)"
    return ("exact mode off: outputs with a prediction may differ after a near-tie in bf16 or on a GPU "
            "(--exact: on; docs/EXACT.md)")


def _fail(message: str, code: int = 2) -> int:
    print(f"foretell: error: {message}", file=sys.stderr)
    return code


# -- serve ------------------------------------------------------------------------------------------
def _add_serve(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="run the OpenAI-compatible server",
        description="Serve /v1/chat/completions, /v1/completions, /v1/models, /health and /metrics "
        "(OpenAI's API, with Predicted Outputs via the 'prediction' field).",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to bind; 0 picks a free one (default: 8000)")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on every endpoint but /health (default: no auth)")
    p.add_argument("--allowed-origins", default=None, metavar="ORIGINS",
                   help="comma-separated origins whose web pages may call the API from a browser (CORS), or '*' for any "
                        "(default: none; the playground is served from the same origin)")
    p.add_argument("--max-body-bytes", type=int, default=None,
                   help="refuse request bodies larger than this with HTTP 413 (default: 8 MiB)")
    _add_model_options(p)
    g = p.add_argument_group("capacity")
    g.add_argument("--kv-budget-tokens", type=int, default=None, help="KV cache size in tokens over all requests (default: 262144)")
    g.add_argument("--max-num-seqs", type=int, default=None, help="requests running concurrently (default: 8)")
    g.add_argument("--max-queue", type=int, default=None, help="requests waiting beyond those; more get HTTP 429 (default: 64)")
    g.add_argument("--k-max", type=int, default=None, help="most draft tokens verified per request and step; 0 disables speculation (default: 128)")
    g.add_argument("--no-prefix-cache", dest="prefix_cache", action="store_false", default=None,
                   help="prefill every prompt in full (default: reuse the KV of a prompt prefix seen before)")
    g.add_argument("--trace", dest="trace_path", default=None, metavar="FILE",
                   help="append a JSON line per request and step: source, k and why, accepted tokens, aligner state")
    g = p.add_argument_group("draft model (requests opt in with speculation.method 'draft' or 'cascade')")
    g.add_argument(
        "--draft-model",
        default=None,
        help="a smaller model with the same vocabulary: packaged name, HF directory or .gguf; 'none' for none "
        "(default: qwen2.5-coder-0.5b for --model qwen2.5-coder-1.5b, none for other models)",
    )
    g.add_argument("--draft-k", type=int, default=None, help="tokens the draft model proposes per step (default: 4)")
    p.add_argument("--shutdown-timeout", type=float, default=30.0,
                   help="on SIGTERM/Ctrl-C, seconds to let requests in flight finish before cancelling them (default: 30)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"], help="uvicorn log level (default: warning)")
    p.set_defaults(func=_serve)


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from foretell.config import ConfigError
    from foretell.server import build_app

    try:
        config = _engine_config(args)
    except ConfigError as exc:
        return _fail(f"--{exc.field.replace('_', '-')}: {exc.message}")
    print(f"foretell {__version__}: loading {args.model or 'the default model'} ...", file=sys.stderr, flush=True)
    try:
        engine = _load_engine(config)
    except LoadError as exc:
        return _fail(str(exc), code=1)
    print(f"foretell: {_exact_line(engine.engine.runner.exact)}", file=sys.stderr, flush=True)
    if engine.engine.runner.block_layers:
        from foretell.engine.cpu_gemm import BLOCK_ROWS_MAX

        print(f"foretell: {engine.engine.runner.block_layers} layers read their GGUF blocks in passes of up to "
              f"{BLOCK_ROWS_MAX} tokens (the same bits as their bf16 weights)", file=sys.stderr, flush=True)
    engine.engine.grammars.warm()  # response_format's tokenizer view, off the first JSON request's path
    try:
        limits = {} if args.max_body_bytes is None else {"max_body_bytes": args.max_body_bytes}
        origins = [o.strip() for o in (args.allowed_origins or "").split(",") if o.strip()]
        app = build_app(engine, api_key=args.api_key, allowed_origins=origins, **limits)
        config = uvicorn.Config(
            app, host=args.host, port=args.port, log_level=args.log_level,
            timeout_graceful_shutdown=args.shutdown_timeout,
        )
        _make_server(config, engine.model_name).run()
    finally:
        engine.shutdown()
    return 0


def _make_server(config, model_name: str):
    """uvicorn's server, printing where it listens once the socket is bound (``--port 0`` included)."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            # drain, then return normally (exit status 0, engine shut down) instead of re-raising the signal
            self._captured_signals.clear()

        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                url = _url(host, port)
                print(f"foretell: serving {model_name} on {url} (OpenAI API at {url}/v1)", flush=True)

    return Server(config)


# -- generate ---------------------------------------------------------------------------------------
def _add_generate(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="generate one completion and print it with stats",
        description="Generate one answer (chat template applied) and print it, then stats on stderr. "
        "With --prediction-file the file's text is proposed as the expected output, as OpenAI's "
        "'prediction'; the output is the same as without it, only faster.",
    )
    p.add_argument("prompt", nargs="?", help="the user message (default: read stdin unless --messages)")
    p.add_argument("--messages", type=Path, help="JSON file with an OpenAI-style messages list (instead of PROMPT)")
    p.add_argument("--system", help="system message to put first")
    p.add_argument("--raw", action="store_true", help="no chat template: continue PROMPT as plain text")
    p.add_argument("--prediction-file", type=Path, help="file whose text is the predicted output")
    p.add_argument("--max-tokens", type=int, default=512, help="most tokens to generate (default: 512)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default: 0)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed")
    p.add_argument("--show", action="store_true", help="colour tokens accepted from the prediction (green)")
    _add_model_options(p)
    p.set_defaults(func=_generate)


def _read_input(args: argparse.Namespace):
    """The prompt text (--raw) or the messages, read before the model loads so mistakes fail fast."""
    from foretell.server import protocol as P

    if args.messages is None and args.prompt is None:
        if sys.stdin.isatty():
            raise ValueError("give a PROMPT, --messages FILE, or pipe the prompt on stdin")
        args.prompt = sys.stdin.read()
    if args.raw:
        return args.prompt or ""
    if args.messages is not None:
        messages = json.loads(args.messages.read_text())
        if not isinstance(messages, list):
            raise ValueError("--messages must hold a JSON list of messages")
    else:
        messages = [{"role": "user", "content": args.prompt}]
    if args.system:
        messages = [{"role": "system", "content": args.system}] + messages
    return [P.Message.model_validate(m) for m in messages]


def _prompt_ids(args: argparse.Namespace, tokenizer, prompt) -> list[int]:
    from foretell.server import protocol as P

    if isinstance(prompt, str):
        return list(tokenizer.encode(prompt))
    return P.chat_prompt_ids(tokenizer, prompt)


def _build_request(args: argparse.Namespace, engine, prompt):
    from foretell.config import SamplingParams, SpeculationParams
    from foretell.engine.api import GenerationRequest

    ids = _prompt_ids(args, engine.tokenizer, prompt)
    prediction = None
    if args.prediction_file is not None:
        text = args.prediction_file.read_text()
        prediction = tuple(engine.tokenizer.encode(text, add_special_tokens=False)) or None
    room = min(engine.max_model_len, engine.config.kv_budget_tokens) - len(ids)
    return GenerationRequest(
        prompt_ids=ids,
        max_tokens=max(1, min(args.max_tokens, room)),
        sampling=SamplingParams(temperature=args.temperature, seed=args.seed),
        speculation=SpeculationParams(prediction=prediction),
    )


def _generate(args: argparse.Namespace) -> int:
    from foretell.config import ConfigError
    from foretell.engine.api import EngineError
    from foretell.server.errors import APIError

    try:
        config = _engine_config(args, max_num_seqs=1, max_queue=0)
        prompt = _read_input(args)
    except ConfigError as exc:
        return _fail(f"--{exc.field.replace('_', '-')}: {exc.message}")
    except (APIError, ValueError, OSError) as exc:
        return _fail(getattr(exc, "message", None) or str(exc))
    try:
        engine = _load_engine(config)
    except LoadError as exc:
        return _fail(str(exc), code=1)
    try:
        req = _build_request(args, engine, prompt)
        engine.validate(req)
        stats = asyncio.run(_print_stream(engine, req, args.show))
    except (APIError, EngineError, ConfigError, ValueError, OSError) as exc:
        return _fail(getattr(exc, "message", None) or str(exc), code=1)
    finally:
        engine.shutdown()
    print(file=sys.stdout, flush=True)
    print(_stats_line(stats, req.speculation.prediction), file=sys.stderr)
    return 0


async def _print_stream(engine, req, show: bool):
    from foretell.engine.detok import split_by_tokens

    stats = None
    async for out in engine.generate(req):
        if show:
            pieces = out.token_texts  # the engine's own per-token text
            spans = split_by_tokens(out.new_text, pieces) if pieces else [out.new_text]
            flags = out.from_prediction or [False]
            text = "".join(f"{ACCEPTED}{s}{RESET}" if f and s else s for s, f in zip(spans, flags))
        else:
            text = out.new_text
        sys.stdout.write(text)
        sys.stdout.flush()
        stats = out.stats
    return stats


def _stats_line(stats, prediction) -> str:
    if stats is None:
        return "(no output)"
    n = stats.completion_tokens
    parts = [f"{n} tokens (prompt {stats.prompt_tokens})"]
    if prediction:
        share = stats.accepted_prediction_tokens / n if n else 0.0
        parts.append(
            f"{stats.accepted_prediction_tokens} from the prediction ({share:.0%}), "
            f"{stats.rejected_prediction_tokens} of its tokens unused"
        )
    passes = max(stats.forward_passes, 1)
    parts.append(f"{stats.forward_passes} forward passes ({n / passes:.2f} tokens/pass)")
    parts.append(f"TTFT {stats.ttft_s:.3f} s")
    if stats.decode_s > 0 and n > 1:
        parts.append(f"{(n - 1) / stats.decode_s:.1f} tokens/s")
    return "-- " + " · ".join(parts)


# -- bench ------------------------------------------------------------------------------------------
def _add_bench(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="run the benchmarks (arguments are passed to the benchmark tool)",
        description="Benchmarks; everything after 'bench' goes to the benchmark tool ('foretell bench --help').",
        add_help=False,
    )
    p.add_argument("bench_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("foretell.bench") is None or importlib.util.find_spec("foretell.bench.cli") is None:
        return _fail("bench: not built yet", code=1)
    from foretell.bench.cli import main as bench_main

    result = bench_main(list(args.bench_args))
    return int(result or 0)


# -- entry point ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="foretell",
        description="foretell: OpenAI-style Predicted Outputs, served losslessly. The caller sends the expected "
        "output as 'prediction'; the model verifies many of its tokens per forward pass, and the answer is "
        "exactly what the model would have written without it.",
    )
    parser.add_argument("--version", action="version", version=f"foretell {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{serve,generate,bench}")
    sub.required = True
    _add_serve(sub)
    _add_generate(sub)
    _add_bench(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # everything after 'bench' belongs to the benchmark tool, --help included
        return _bench(argparse.Namespace(bench_args=argv[1:]))
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
