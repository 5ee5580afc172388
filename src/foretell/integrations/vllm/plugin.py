"""The ``vllm.general_plugins`` entry point (declared in pyproject.toml): vLLM calls :func:`register` in the
API server, the engine core and every worker process before the model runner is built.

It checks the vLLM version and installs the model-runner hook (:func:`.adapter.install_runner_hook`). On an
unsupported version it only logs: the plugin is loaded by every vLLM run in the environment, and refusing is
the job of the proposer and the middleware, which raise a clear error when they are actually used.
"""

from __future__ import annotations

import logging

from foretell.integrations.vllm import adapter

log = logging.getLogger("foretell.vllm")


def register() -> None:
    try:
        adapter.check_version()
    except adapter.UnsupportedVLLMVersion as exc:
        log.warning("foretell plugin inactive: %s", exc)
        return
    adapter.install_runner_hook()
