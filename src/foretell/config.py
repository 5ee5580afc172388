"""Validated configuration dataclasses shared by the core, the engine and the server."""

from __future__ import annotations

import json
from dataclasses import dataclass, field


class ConfigError(ValueError):
    """A configuration or request parameter is invalid; ``field`` names it."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


def _check(cond: bool, field_name: str, message: str) -> None:
    if not cond:
        raise ConfigError(field_name, message)


@dataclass(frozen=True)
class SamplingParams:
    """How the next token is chosen from the target's logits (applied identically with or without drafts).

    temperature 0 means greedy. ``seed`` makes sampling reproducible: the random number used at output
    position t depends only on (seed, t), so a request samples the same tokens with or without a prediction.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    logprobs: int | None = None  # None = no logprobs; n >= 0 = chosen token's logprob plus n top ones
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias in [-100, 100]) added to its logit
    json_schema: str | None = None  # the text of a JSON schema the output must follow (foretell.core.grammar)

    def __post_init__(self) -> None:
        _check(0.0 <= self.temperature <= 100.0, "temperature", "must be between 0 and 100")
        _check(0.0 < self.top_p <= 1.0, "top_p", "must be in (0, 1]")
        _check(self.top_k >= 0, "top_k", "must be >= 0 (0 disables it)")
        _check(0.0 <= self.min_p <= 1.0, "min_p", "must be in [0, 1]")
        _check(-2.0 <= self.presence_penalty <= 2.0, "presence_penalty", "must be between -2 and 2")
        _check(-2.0 <= self.frequency_penalty <= 2.0, "frequency_penalty", "must be between -2 and 2")
        _check(0.0 < self.repetition_penalty <= 10.0, "repetition_penalty", "must be in (0, 10]")
        _check(self.logprobs is None or 0 <= self.logprobs <= 20, "top_logprobs", "must be between 0 and 20")
        for token, bias in self.logit_bias:
            _check(isinstance(token, int) and token >= 0, "logit_bias", f"token id {token!r} must be an integer >= 0")
            _check(-100.0 <= bias <= 100.0, "logit_bias", f"bias {bias!r} for token {token} must be between -100 and 100")
        tokens = [t for t, _ in self.logit_bias]
        _check(len(set(tokens)) == len(tokens), "logit_bias", "a token id may appear only once")
        if self.json_schema is not None:
            try:
                schema = json.loads(self.json_schema)
            except ValueError:
                schema = None
            _check(isinstance(schema, dict), "response_format", "the JSON schema must be a JSON object")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def has_penalties(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty or self.repetition_penalty != 1.0)

    @property
    def adjusts_logits(self) -> bool:
        """Whether :func:`foretell.core.sampling.penalize` changes the logits (a bias, a penalty or a schema)."""
        return bool(self.logit_bias) or self.has_penalties or self.json_schema is not None


SPECULATION_METHODS = ("auto", "none", "ngram", "prediction", "draft", "cascade")
CASCADE_RULES = ("chow", "diff", "opt", "v1", "v2", "v3")
DEFAULT_CASCADE_RULE = "v3"  # the reference colab's default
DEFAULT_CASCADE_ALPHA = 0.5


@dataclass(frozen=True)
class SpeculationParams:
    """Per-request speculation settings.

    ``method`` picks the draft sources: ``auto`` (default) = the prediction where one is given, with n-gram
    lookup over prompt + output wherever it drafts better (and as the only source without a prediction);
    ``none`` = plain decoding; ``ngram`` = n-gram lookup alone (a prediction is then ignored for drafting);
    ``prediction`` = the prediction aligner alone; ``draft`` = the server's draft model with exact (lossless)
    rejection sampling, combined with the prediction (where one is given) and n-gram lookup: the draft
    policy runs the draft model only where its drafts, priced with its own passes, beat theirs; ``cascade`` = the draft model verified against a speculative-cascade target (lossy,
    only when asked for) with deferral ``rule`` (chow, diff, opt, v1, v2, v3; default v3) and lenience
    ``alpha`` in [-1, 1] (default 0.5): -1 makes every rule exact speculative decoding, 1 the drafter alone.

    ``prediction`` is the expected output as token ids (None = no prediction). ``search_length`` bounds how
    many prediction tokens past the last matched one realignment may look (None = unbounded; the analogue of
    Azure's ``x-ms-oai-ev3-predictor_search_length``). ``k_max`` caps tokens proposed per step (None = the
    engine's; 0 = plain decoding).
    """

    prediction: tuple[int, ...] | None = None
    search_length: int | None = None
    method: str = "auto"
    k_max: int | None = None
    rule: str | None = None  # cascades only
    alpha: float | None = None  # cascades only

    def __post_init__(self) -> None:
        _check(self.method in SPECULATION_METHODS, "method", f"must be one of {', '.join(SPECULATION_METHODS)}")
        _check(self.search_length is None or self.search_length >= 1, "search_length", "must be >= 1")
        _check(self.k_max is None or 0 <= self.k_max <= 1024, "k_max", "must be between 0 and 1024")
        cascade = self.method == "cascade"
        _check(self.rule is None or cascade, "rule", "only applies to method 'cascade'")
        _check(self.alpha is None or cascade, "alpha", "only applies to method 'cascade'")
        _check(self.rule is None or self.rule in CASCADE_RULES, "rule", f"must be one of {', '.join(CASCADE_RULES)}")
        _check(self.alpha is None or -1.0 <= self.alpha <= 1.0, "alpha", "must be between -1 and 1")

    @property
    def uses_prediction(self) -> bool:
        """Drafts may come from the prediction (a non-empty one, with method auto, prediction or draft)."""
        return bool(self.prediction) and self.method in ("auto", "prediction", "draft")

    @property
    def uses_ngram(self) -> bool:
        """Drafts may come from n-gram lookup over prompt + output (methods auto, ngram and draft)."""
        return self.method in ("auto", "ngram", "draft")

    @property
    def uses_draft_model(self) -> bool:
        return self.method in ("draft", "cascade")

    @property
    def cascade_rule(self) -> str:
        return self.rule or DEFAULT_CASCADE_RULE

    @property
    def cascade_alpha(self) -> float:
        return DEFAULT_CASCADE_ALPHA if self.alpha is None else self.alpha


@dataclass(frozen=True)
class EngineConfig:
    """Engine settings. ``kv_budget_tokens`` bounds the KV cache (tokens over all sequences, including
    the prefix cache); ``max_num_seqs`` bounds concurrently running requests; requests beyond them wait in
    a queue of ``max_queue``; beyond that they are refused (QueueFullError → HTTP 429)."""

    model: str | None = None  # None/"default" = packaged default model; packaged name; HF dir; .gguf path
    draft_model: str | None = None  # a smaller model with the same vocabulary (same specs as ``model``)
    draft_k: int = 4  # tokens the draft model proposes per step (a request's k_max can lower it)
    dtype: str = "auto"  # auto | bfloat16 | float16 | float32
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    max_model_len: int | None = None  # None = min(model's max positions, 32768)
    max_num_seqs: int = 8
    kv_budget_tokens: int = 262144
    max_queue: int = 64
    prefill_chunk: int = 512  # prompt tokens per step per request, so long prompts don't stall decodes
    k_max: int = 128  # most draft tokens proposed per request and step
    max_prediction_tokens: int = 32768
    adaptive_k: bool = True
    prefix_cache: bool = True
    measure_cost_curve: bool = True
    seed: int = 0
    trace_path: str | None = None  # append a JSON line per request and step (foretell.engine.trace)
    # batch-invariant numerics: outputs bit-identical with and without speculation in any dtype. None = auto: on
    # where a CPU runs foretell's kernels (not with bf16 on AMX), off on a GPU (engine.runner.exact_by_default)
    exact: bool | None = None
    # exact mode on foretell's kernel: prompt chunks of at most this many rows run on the kernel, each row alone as
    # decode rows do (a short prompt reads the weights once, not twice; such a chunk's KV is reusable from the
    # prefix cache at any length). None = auto: every chunk where the kernel runs on AMX tiles (faster there at
    # every size), elsewhere the chunk sizes start-up found faster on the kernel than on the library GEMM (with the
    # cost curve; without a measurement, chunks whose kernel pass costs at most two one-token passes); 0 = off
    exact_prompt_kernel_rows: int | None = None
    # fp32 on a CPU: "dispatch" = per pass size, MKL or foretell's GEMM (engine/cpu_gemm.py; oneDNN packed, a
    # second copy of the weights, where it cannot be built), whichever start-up measured faster for whole
    # passes of that size, the GEMM on a bf16 copy where the weights are exactly bf16; "lean" = the same with
    # the bf16 copy only (MKL widens it per call: prefill ~6% slower, 1.4 GB less on the 0.5B); "packed" =
    # oneDNN packed only (one copy; exact mode's choice)
    cpu_linears: str = "dispatch"
    # exact mode on a CPU: the output head keeps an int8 copy (132 MB on the 0.5B) that bounds every logit, so short
    # passes whose requests need only the argmax (greedy, no logprobs) read half the head's bytes (on AMX int8 tiles,
    # or AVX2 for 1-2 rows; cpu_gemm.ArgmaxHead)
    argmax_head: bool = True
    # exact mode on a CPU (bf16 with AVX-512, or fp32): RMSNorm (with the residual addition before it), SiLU(gate) * up
    # and the rotary embedding on foretell's kernel, one call each (runner.GlueRMSNorm, GlueMLP, LeanDecoder._rope)
    layer_glue: bool = True
    # exact mode on a CPU: linear layers converted from GGUF blocks (Q5_0, Q8_0, Q4_K) compute their decode and verify
    # rows as llama.cpp does, with int8 inputs (one scale per 32 values) and exact int32 sums on AVX512-VNNI or AVX2
    # (cpu_gemm.CpuGemm.linear_int8): fewer bytes read than the bf16 weights, not the bf16 model's values. None = auto:
    # on a CPU without AMX, in fp32 (runner.int8_by_default; with AMX, bf16 tiles made edits with a prediction as fast
    # and long verify passes 2.9x cheaper: measured on a Sapphire Rapids); dtype "auto" picks fp32 for a model with GGUF
    # blocks on a CPU with AVX512-BF16 and no AMX (runner.int8_dtype: an AMD EPYC Zen 4 decoded the 0.5B 1.8x as
    # fast); True with dtype "auto" picks fp32 on any CPU; the head keeps its route
    int8_linears: bool | None = None
    # those int8 linear layers' blocks laid out once as panels (16 weight rows' values in the order the many-row
    # kernel's tiles read them, as many bits as the file's): decode steps, verify passes and prompt chunks all run
    # on that kernel (cpu_gemm.CpuGemm.panels); off: decode and verify rows on foretell_linear_q8 over the blocks
    int8_panels: bool = True
    # exact mode: layers on int8 panels keep their fp32 weights too, for a peer's model.generate on the same model
    # object (foretell bench's HF peers: ModelRunner.library_linears); off, no pass reads them (1.4 GB on the 0.5B)
    library_weights: bool = False

    def __post_init__(self) -> None:
        _check(self.dtype in ("auto", "bfloat16", "float16", "float32"), "dtype", "auto|bfloat16|float16|float32")
        _check(self.cpu_linears in ("dispatch", "lean", "packed"), "cpu_linears", "dispatch|lean|packed")
        _check(self.max_model_len is None or self.max_model_len >= 16, "max_model_len", "must be >= 16")
        _check(self.max_num_seqs >= 1, "max_num_seqs", "must be >= 1")
        _check(self.kv_budget_tokens >= 64, "kv_budget_tokens", "must be >= 64")
        _check(self.max_queue >= 0, "max_queue", "must be >= 0")
        _check(self.prefill_chunk >= 16, "prefill_chunk", "must be >= 16")
        _check(self.exact_prompt_kernel_rows is None or self.exact_prompt_kernel_rows >= 0,
               "exact_prompt_kernel_rows", "must be >= 0")
        _check(0 <= self.k_max <= 1024, "k_max", "must be between 0 and 1024")
        _check(1 <= self.draft_k <= 64, "draft_k", "must be between 1 and 64")
        _check(self.max_prediction_tokens >= 0, "max_prediction_tokens", "must be >= 0")
