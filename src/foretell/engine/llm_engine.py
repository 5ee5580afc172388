"""The engine: admit requests, schedule one packed forward pass per step, verify drafts, emit outputs.

    step():  admit waiting requests → propose drafts → one forward pass → verify → append → outputs

Speculation is lossless: every emitted token is the one the target model's sampler picks at that position
(see foretell.core.verify); drafts only decide how many positions one pass gets to check.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Callable

import torch

from foretell.config import ConfigError, EngineConfig
from foretell.core.adaptive_k import CostModel
from foretell.core.draft import CombinedProposer, Draft
from foretell.core.grammar import GrammarCompiler, GrammarError
from foretell.core.policy import Decision, DraftPolicy, common_prefix
from foretell.core.prediction import make_proposer
from foretell.core.tokens import TokenClasses
from foretell.core.verify import VerifyResult, token_logprobs, verify_tree
from foretell.engine.api import (
    GenerationRequest,
    QueueFullError,
    RequestFailedError,
    RequestOutput,
    RequestTooLongError,
)
from foretell.engine.cost import DEFAULT_COST_POINTS, CostCalibrator, measure_pass_ratio, synchronize
from foretell.engine.drafter import DraftModel, parameter_count, require_draft_model, verify_step
from foretell.engine.kv_cache import KVPool
from foretell.engine.runner import (ExactModeUnavailable, KernelPlan, ModelRunner, Segment, exact_by_default,
                                   int8_dtype, prepack_cpu_linears, row_dispatch_cpu_linears, stored_bf16,
                                   widen_for_int8)
from foretell.engine.sequence import Sequence, Status
from foretell.engine.trace import Tracer, file_tracer, step_record

log = logging.getLogger("foretell.engine")
SCORING_CHUNK = 64  # prompt rows a pass computes for a request that wants its prompt's logprobs (logits are fp32 rows)


class LLMEngine:
    """``runner``: the target's :class:`ModelRunner` (a plain transformers model is wrapped in one);
    ``drafter``: an optional :class:`DraftModel` for requests that ask for draft-model speculation."""

    def __init__(
        self,
        runner,
        tokenizer,
        config: EngineConfig = EngineConfig(),
        cost: CostModel | None = None,
        drafter: DraftModel | None = None,
    ):
        self.config = config
        self.tokenizer = tokenizer
        self.runner = runner if isinstance(runner, ModelRunner) else ModelRunner(runner, exact=bool(config.exact))
        if config.exact and not self.runner.exact:
            raise ValueError("EngineConfig(exact=True) needs a ModelRunner built with exact=True")
        self.drafter = drafter
        model = self.runner.model
        self.max_model_len = _max_model_len(model, config)
        self.eos_ids = _eos_ids(model, tokenizer)
        self.token_classes = TokenClasses.from_tokenizer(tokenizer)
        self.grammars = GrammarCompiler(tokenizer, self.runner.vocab_size)  # JSON schemas (response_format)
        self.cost = cost or CostModel(DEFAULT_COST_POINTS)
        self.pool = KVPool(
            self.runner.kv_shape, config.kv_budget_tokens, self.max_model_len, prefix_cache=config.prefix_cache,
            reuse_align=config.prefill_chunk if self.runner.exact else None,
            kernel_rows=prompt_kernel_rows(self.runner, self.cost, config),
        )
        self.calibrator: CostCalibrator | None = None  # refines self.cost from the passes run (from_config)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.forward_passes = 0
        self.started = time.perf_counter()
        self.trace: Tracer | None = file_tracer(config.trace_path) if config.trace_path else None

    @classmethod
    def from_config(cls, config: EngineConfig) -> tuple["LLMEngine", str]:
        """Load the configured model (default, HF directory or .gguf) and measure its cost curve."""
        from foretell.engine.cost import cached_cost_model, cached_prompt_kernel_rows
        from foretell.models.loader import load_model, load_tokenizer, pick_device, pick_dtype, resolve_model
        from foretell.paths import cache_dir

        resolved = resolve_model(config.model)
        device = pick_device(config.device)
        draft_dtype = dtype = pick_dtype(device, config.dtype)
        # whether exact mode's int8 route would take this model's layers (it computes in fp32)
        routed = int8_dtype(device, torch.bfloat16, resolved.path, config.int8_linears, config.exact) == torch.float32
        if config.dtype == "auto" and routed:
            dtype = torch.float32
        elif config.int8_linears and dtype != torch.float32:
            raise ConfigError("int8_linears", f"the int8 route computes in float32: use --dtype auto or float32, "
                                              f"not {config.dtype}")
        # fp32 on the int8 route: loaded in bf16 (the stored values) and widened but for the layers the route takes
        narrow = routed and dtype == torch.float32 and stored_bf16(resolved.path)
        model = load_model(resolved.path, dtype=torch.bfloat16 if narrow else dtype, device=device)
        if narrow:
            widen_for_int8(model)
        weights = parameter_count(model)  # as loaded: the runner may keep some layers as int8 panels only
        exact = exact_by_default(device, dtype) if config.exact is None else config.exact
        runner, drafter = None, None
        if exact:  # the runner sets up its own linear layers
            try:
                runner = ModelRunner(model, exact=True, argmax_head=config.argmax_head, layer_glue=config.layer_glue,
                                     int8=config.int8_linears, int8_panels=config.int8_panels,
                                     library_weights=config.library_weights)
            except ExactModeUnavailable as exc:
                if config.exact:
                    raise
                log.warning("exact mode is off: %s", exc)  # on by default only; the probe changed the layers
                exact, model = False, load_model(resolved.path, dtype=dtype, device=device)
        prepacked, plan = False, None
        if not exact:
            prepacked, plan = _cpu_linears(model, packed_only=config.cpu_linears == "packed",
                                           lean=config.cpu_linears == "lean")
            runner = ModelRunner(model)
        tokenizer = load_tokenizer(resolved.path)
        if config.draft_model:
            drafted = resolve_model(config.draft_model)
            draft_runner, draft_weights = _drafter_runner(drafted.path, device, draft_dtype, config)
            drafter = DraftModel(
                draft_runner, runner.vocab_size, config.draft_k,
                target_tokenizer=tokenizer, tokenizer=load_tokenizer(drafted.path),
                token_cost=draft_weights / max(1, weights),  # until measured below
            )
        engine = cls(runner, tokenizer, config, drafter=drafter)
        if config.measure_cost_curve:
            route = ("|exact+kernel" if engine.runner.exact_kernel else "|exact") if exact else ""
            if engine.runner.block_layers or engine.runner.block_groups:  # blocks read, layers joined: another curve
                route += f"|blocks={engine.runner.block_layers},groups={engine.runner.block_groups}"
            if engine.runner.int8_layers:  # int8 products on GGUF blocks: another curve
                route += f"|int8={engine.runner.int8_layers}"
            if engine.runner.panel_layers:  # on panels: every pass on the many-row kernel, another curve
                route += f"|panels={engine.runner.panel_layers}"
            if engine.runner.lean:  # decode and verify passes skip transformers' wrappers: another curve
                route += "|lean"
            key = f"{resolved.path}|prepacked={prepacked}{route}"
            engine.cost = cached_cost_model(engine.runner, key, cache_dir() / "cost", plan)
            engine.pool.kernel_rows = prompt_kernel_rows(  # before any request
                engine.runner, engine.cost, config,
                lambda: cached_prompt_kernel_rows(engine.runner, key, cache_dir() / "cost", config.prefill_chunk, plan))
            engine.calibrator = CostCalibrator(engine.cost.points, attention=engine.cost.attention)
            if drafter is not None:  # the policy prices each drafted token with the drafter's measured pass
                drafter.token_cost = measure_pass_ratio(drafter.runner, engine.runner)
                log.info("draft model: a one-token pass costs %.2f of the target's", drafter.token_cost)
        return engine, resolved.name

    @property
    def speculation_methods(self) -> tuple[str, ...]:
        """The ``speculation.method`` values this engine serves (draft and cascade need a draft model)."""
        base = ("auto", "none", "ngram", "prediction")
        return base + ("draft", "cascade") if self.drafter is not None else base

    # -- requests ---------------------------------------------------------------------------------
    def validate(self, req: GenerationRequest) -> None:
        """Raise RequestTooLongError / ConfigError for a request that can never run."""
        n = len(req.prompt_ids)
        if n >= self.max_model_len:
            raise RequestTooLongError("messages", f"prompt is {n} tokens; the context length is {self.max_model_len}")
        if n + req.max_tokens > self.max_model_len:
            raise RequestTooLongError(
                "max_tokens",
                f"prompt ({n} tokens) + max_tokens ({req.max_tokens}) exceeds the context length {self.max_model_len}",
            )
        if n + req.max_tokens > self.config.kv_budget_tokens:
            raise RequestTooLongError("max_tokens", f"prompt + max_tokens exceeds the KV budget ({self.config.kv_budget_tokens} tokens)")
        pred = req.speculation.prediction
        if pred is not None and len(pred) > self.config.max_prediction_tokens:
            raise RequestTooLongError(
                "prediction", f"prediction is {len(pred)} tokens; the limit is {self.config.max_prediction_tokens}"
            )
        require_draft_model(req.speculation, self.drafter)
        vocab = self.runner.vocab_size
        if any(not 0 <= t < vocab for t in req.prompt_ids):
            raise ConfigError("prompt", f"token ids must be in [0, {vocab})")
        if pred is not None and any(not 0 <= t < vocab for t in pred):
            raise ConfigError("prediction", f"token ids must be in [0, {vocab})")
        if any(t >= vocab for t, _ in req.sampling.logit_bias):
            raise ConfigError("logit_bias", f"token ids must be in [0, {vocab})")
        if req.sampling.json_schema is not None:
            try:
                self.grammars.grammar(req.sampling.json_schema)
            except GrammarError as exc:
                raise ConfigError("response_format", str(exc)) from None

    def add_request(self, req: GenerationRequest) -> None:
        self.validate(req)
        if len(self.waiting) + len(self.running) >= self.config.max_num_seqs + self.config.max_queue:
            raise QueueFullError(f"server busy: {len(self.running)} running, {len(self.waiting)} queued")
        stop_ids = frozenset(req.stop_token_ids) | (frozenset() if req.ignore_eos else self.eos_ids)
        proposer = make_proposer(req.prompt_ids, req.speculation, self.token_classes) if self.config.k_max > 0 else None
        if req.speculation.uses_draft_model:  # "draft": with the prediction and n-gram lookup; "cascade": alone
            drafter = self.drafter.proposer(req.speculation)
            proposer = CombinedProposer([proposer, drafter]) if proposer is not None else drafter
        policy = DraftPolicy(proposer, self.cost, self.config.adaptive_k, trees=not self.runner.exact,
                             stop_ids=stop_ids)
        limit = len(req.prompt_ids) + req.max_tokens
        grammar = self.grammars.matcher(req.sampling.json_schema) if req.sampling.json_schema is not None else None
        self.waiting.append(Sequence(req, self.tokenizer, stop_ids, limit, policy, grammar))

    def abort(self, request_id: str) -> bool:
        """Drop a request wherever it is and free its KV (nothing is kept in the prefix cache)."""
        for seq in list(self.waiting):
            if seq.id == request_id:
                self.waiting.remove(seq)
                seq.abort()
                return True
        for seq in self.running:
            if seq.id == request_id:
                seq.abort()
                self._release(seq, keep=False)
                return True
        return False

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # -- the step ---------------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """One step. A request that fails (its KV allocation, its part of the pass, its verification) gets
        one output with finish_reason "error" and is dropped; the other requests go on."""
        failed = self._admit()
        if self.drafter is not None:
            self.drafter.prepare(self.running, self.config.prefill_chunk)
        seqs, segments = self._schedule()
        if not segments:
            return failed
        start = time.perf_counter()
        logits = self._forward(segments)
        self._calibrate(segments, start)
        self.forward_passes += 1
        outputs = [self._advance_or_fail(seq, seg, lg) for seq, seg, lg in zip(seqs, segments, logits)]
        return failed + [o for o in outputs if o is not None]

    def _calibrate(self, segments: list[Segment], start: float) -> None:
        """Feed a pass of decode/verify tokens only (every token needs logits) to the cost calibrator; when
        it has a better curve, every request's policy prices drafts with it from the next step on."""
        if self.calibrator is None or any(seg.num_logits != len(seg.tokens) for seg in segments):
            return
        synchronize(self.runner.device)
        extra = sum(self.cost.attention.extra(len(seg.tokens), seg.kv.length) for seg in segments)
        cost = self.calibrator.observe(sum(len(seg.tokens) for seg in segments), time.perf_counter() - start, extra)
        if cost is not None:
            self.cost = cost
            for seq in [*self.running, *self.waiting]:
                seq.policy.cost = cost

    def _forward(self, segments: list[Segment]) -> list:
        """The packed pass; if it fails, each segment alone, so a failure is pinned on its request (an
        exception in place of its logits). A failed pass changed no ``kv.length``, so retrying is safe."""
        try:
            return self.runner.forward(segments, reuse_logits=True)  # verified before the next pass
        except Exception as exc:
            if len(segments) == 1:
                return [exc]
        results = []
        for seg in segments:
            try:
                results.append(self.runner.forward([seg])[0])
            except Exception as exc:
                results.append(exc)
        return results

    def _advance_or_fail(self, seq: Sequence, seg: Segment, logits) -> RequestOutput | None:
        try:
            if isinstance(logits, Exception):
                raise logits
            return self._advance(seq, seg, logits)
        except Exception as exc:
            return self._fail(seq, exc)

    def _fail(self, seq: Sequence, exc: Exception) -> RequestOutput:
        """Drop a request that failed inside the engine and free its KV; its output carries the error."""
        log.error("request %s failed in the engine: %s: %s", seq.id, type(exc).__name__, exc, exc_info=exc)
        if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
            error = RequestFailedError("out of memory for this request; retry later", 503, "out_of_memory")
        else:
            error = RequestFailedError("internal error while generating this request")
        seq.status, seq.finish_reason = Status.FINISHED, "error"
        if seq in self.waiting:
            self.waiting.remove(seq)
        self._release(seq, keep=False)
        out = seq.output([], [], None)
        out.error = error
        return out

    def _admit(self) -> list[RequestOutput]:
        failed = []
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            if not self.pool.can_admit(seq.limit):
                break
            self.waiting.popleft()
            try:
                scoring = seq.prompt_logprobs is not None  # needs every prompt position's logits: no reuse
                seq.kv, seq.stats.cached_tokens = self.pool.allocate(seq.id, seq.limit, seq.tokens, reuse=not scoring)
            except Exception as exc:  # e.g. the memory for its buffers is not there: this request fails alone
                failed.append(self._fail(seq, exc))
                continue
            seq.status = Status.RUNNING
            seq.scheduled_at = time.perf_counter()
            seq.stats.queue_s = seq.scheduled_at - seq.arrival
            self.running.append(seq)
        return failed

    def _schedule(self) -> tuple[list[Sequence], list[Segment]]:
        """Every running sequence gets a segment: a prompt chunk (within the prefill budget), or its pending
        token(s) plus a draft whose size the adaptive-k policy picks."""
        prefill_budget = self.config.prefill_chunk
        seqs, segments = [], []
        batch_tokens, batch_expected = 0, 0.0  # what this pass holds so far, and what it should yield
        decoding_after = sum(seq.pending == 1 for seq in self.running)  # each adds >= 1 token, yields >= 1
        for seq in self.running:
            pending = seq.pending
            decoding_after -= pending == 1
            start = seq.kv.length
            scoring = seq.prompt_logprobs is not None
            if pending > 1:
                chunk = min(pending, SCORING_CHUNK, prefill_budget) if scoring else \
                    self._prompt_chunk(start, pending, prefill_budget)
                prefill_budget -= chunk
                if chunk == 0:
                    continue
                if chunk < pending:
                    seqs.append(seq)
                    segments.append(Segment(seq.kv, seq.tokens[start : start + chunk], num_logits=chunk if scoring else 0,
                                            prompt_on_kernel=not scoring and self._prompt_on_kernel(seq, start)))
                    batch_tokens += chunk
                    continue
            others = batch_tokens + pending - 1 + decoding_after
            seq.decision = self._propose(seq, others, batch_expected + decoding_after)
            nodes, parents, _ = seq.decision.tree()
            tokens = seq.tokens[start:] + nodes
            seqs.append(seq)
            rows = len(tokens) if scoring and pending > 1 else len(nodes) + 1  # scoring: the prompt's rows too
            segments.append(Segment(seq.kv, tokens, num_logits=rows, parents=parents,
                                    prompt_on_kernel=pending > 1 and not scoring and self._prompt_on_kernel(seq, start),
                                    argmax_only=seq.argmax_only and not scoring))
            seq.batch_tokens = batch_tokens  # what the pass held before this request (for the trace)
            batch_tokens += len(tokens)
            batch_expected += seq.decision.expected
        return seqs, segments

    def _prompt_chunk(self, start: int, pending: int, budget: int) -> int:
        """Prompt tokens this sequence computes in this pass (0 = wait for the next one). In exact mode a
        chunk never crosses a multiple of ``prefill_chunk`` and is never cut short by the budget, so its
        bounds, and with them its keys/values to the bit, depend on the prompt alone."""
        if not self.runner.exact:
            return min(pending, budget)
        size = self.config.prefill_chunk
        chunk = min(pending, size - start % size)
        return chunk if chunk <= budget else 0

    def _prompt_on_kernel(self, seq: Sequence, start: int) -> bool:
        """Whether this sequence's prompt chunk from ``start`` runs on exact mode's kernel (``KVPool.kernel_start``:
        decided by the prompt alone, so its bits are the same with and without a prediction)."""
        return bool(self.pool.kernel_rows) and start >= self.pool.kernel_start(len(seq.req.prompt_ids))

    def _propose(self, seq: Sequence, batch_tokens: int, batch_expected: float) -> Decision:
        """This step's draft (see :class:`DraftPolicy`), given the other tokens of this pass
        (``batch_tokens``: the requests scheduled before it, one token per decoding request after it, and this
        request's pending tokens beyond the first) and what they should yield."""
        k_max = seq.req.speculation.k_max
        room = min(seq.remaining - 1, self.config.k_max, self.config.k_max if k_max is None else k_max)
        return seq.policy.decide(room, batch_tokens, batch_expected, len(seq.tokens))

    def _advance(self, seq: Sequence, seg: Segment, logits) -> RequestOutput | None:
        seq.stats.forward_passes += 1
        mid_prompt = len(seg.tokens) < seq.pending
        if seq.prompt_logprobs is not None and seq.kv.length < seq.num_prompt - 1:
            logits = self._score_prompt(seq, seg, logits)
        if mid_prompt:  # a prompt chunk: nothing to sample yet
            seq.kv.length += len(seg.tokens)
            seq.stats.prefill_passes += 1
            return None
        draft, result, from_drafter = self._verify(seq, seg, logits)
        appended, flags = [], []
        for i, token in enumerate(result.tokens):
            from_prediction = i < result.num_accepted and draft.source == "prediction"
            appended.append(token)
            flags.append(from_prediction)
            if seq.append(token):
                break
        seq.stats.cascade_drafter_tokens += sum(from_drafter[: len(appended)])
        seq.sampler.observe(appended)
        seq.policy.record(seq.decision, appended)
        if seq.proposer is not None:
            seq.proposer.observe(appended)
            aligner = getattr(seq.proposer, "aligner", None)
            if aligner is not None:  # OpenAI's meaning: prediction tokens that appeared in the completion
                seq.stats.accepted_prediction_tokens = min(aligner.matched, len(aligner.prediction), seq.num_output)
        if self.trace is not None:
            self.trace(step_record(self.forward_passes, self.started, seq.id, seq.num_output - len(appended),
                                   seq.batch_tokens, seq.decision, draft.source if result.num_accepted else "none",
                                   result.num_accepted, len(appended), seq.proposer))
        now = time.perf_counter()
        if seq.first_token_at is None:
            seq.first_token_at = now
            seq.stats.ttft_s = now - seq.arrival
        seq.stats.decode_s = now - seq.first_token_at
        logprobs = result.logprobs[: len(appended)] if result.logprobs is not None else None
        out = seq.output(appended, flags, logprobs)
        if seq.status is Status.FINISHED:
            self._release(seq, keep=True)
        return out

    @staticmethod
    def _score_prompt(seq: Sequence, seg: Segment, logits):
        """Keep the logprobs of the prompt tokens this segment's rows predict (a row predicts the next position);
        returns the rows left for sampling (none for a mid-prompt chunk)."""
        start = seq.kv.length
        rows = min(len(seg.tokens), seq.num_prompt - 1 - start)
        targets = seq.tokens[start + 1 : start + 1 + rows]
        seq.prompt_logprobs += token_logprobs(logits[:rows], targets, seq.req.prompt_logprobs)
        return logits[rows:]

    def _verify(self, seq: Sequence, seg: Segment, logits) -> tuple[Draft, VerifyResult, list[bool]]:
        """Verify this step's draft (a chain, or a token tree of two branches); keep the accepted tokens' KV
        in place and count the draft per source. Returns the branch the target followed, the result, and per
        emitted token whether a cascade took it from the drafter's distribution."""
        nodes, parents, branches = seq.decision.tree()
        if parents is None:
            draft, path = branches[0]
            result, from_drafter = verify_step(logits, draft, seq.sampler)
        else:
            winner, result = verify_tree(logits, branches, seq.sampler)
            draft, path = branches[winner]
            from_drafter = [False] * len(result.tokens)
        if any(not 0 <= t < self.runner.vocab_size for t in result.tokens):  # non-finite logits, say
            raise ValueError(f"sampled a token id outside the vocabulary: {result.tokens}")
        accepted = path[: result.num_accepted]
        first_node = seq.kv.length + len(seg.tokens) - len(nodes)  # slot of node 0
        if accepted != list(range(len(accepted))):  # the branch's own nodes sit after the main draft's
            seq.kv.move([first_node + i for i in accepted], first_node)
        seq.kv.length = first_node + result.num_accepted
        accepted_tokens = result.tokens[: result.num_accepted]
        for n, (branch, _) in enumerate(branches):  # a branch's prefix shared with the main draft counts once
            shared = common_prefix(branches[0][0].tokens, branch.tokens) if n else 0
            if len(branch) > shared:
                hits = common_prefix(branch.tokens, accepted_tokens)
                seq.stats.record_draft(branch.source, len(branch) - shared, max(0, hits - shared))
        return draft, result, from_drafter

    def _release(self, seq: Sequence, keep: bool) -> None:
        if seq in self.running:
            self.running.remove(seq)
        if seq.kv is not None:
            seq.kv.length = min(seq.kv.length, len(seq.tokens))
        keep = keep and seq.prompt_logprobs is None  # a scoring request's prompt ran in other chunks: not cached
        self.pool.release(seq.id, seq.kv, seq.tokens if keep else None, len(seq.req.prompt_ids))
        seq.kv = None
        if self.drafter is not None:
            self.drafter.release(seq.id)

    # -- convenience ------------------------------------------------------------------------------
    def generate(self, requests: list[GenerationRequest]) -> dict[str, list[RequestOutput]]:
        """Run requests to completion (all admitted together, continuous batching); outputs per request."""
        for req in requests:
            self.add_request(req)
        outputs: dict[str, list[RequestOutput]] = {r.request_id: [] for r in requests}
        while self.has_unfinished():
            for out in self.step():
                outputs[out.request_id].append(out)
        return outputs


def _drafter_runner(path, device: torch.device, dtype: torch.dtype, config: EngineConfig) -> tuple[ModelRunner, int]:
    """The draft model's runner and its parameter count as loaded. Where exact mode's int8 route would take it as
    a target (``--dtype auto``, or ``int8_linears`` asked for), it runs there as the target does: loaded in bf16,
    widened but for the layers that keep their GGUF blocks, on the route's kernels. Its drafts need no exactness
    (the target verifies them); the route is what is fast: on a 2-core AMD EPYC Zen 4 the packaged 0.5B's
    one-token pass took 86 ms on its bf16 copies widened per call, 2.3 one-token passes of the 1.5B target on the
    route, which the policy had priced at 0.35 from the parameter counts. Elsewhere it keeps only its bf16 copies
    (lean: the 0.5B's fp32 weights are 1.4 GB beside a 1.5B target of 1.9 GB)."""
    from foretell.models.loader import load_model

    routed = int8_dtype(device, torch.bfloat16, path, config.int8_linears, config.exact) == torch.float32
    if routed and (config.dtype == "auto" or config.int8_linears) and stored_bf16(path):
        model = load_model(path, dtype=torch.bfloat16, device=device)
        widen_for_int8(model)
        weights = parameter_count(model)
        try:
            return ModelRunner(model, exact=True, int8=config.int8_linears, int8_panels=config.int8_panels), weights
        except ExactModeUnavailable as exc:
            log.warning("the draft model runs off the int8 route: %s", exc)
    model = load_model(path, dtype=dtype, device=device)
    weights = parameter_count(model)
    _cpu_linears(model, packed_only=config.cpu_linears == "packed", lean=True)
    return ModelRunner(model), weights


def _cpu_linears(model, packed_only: bool, lean: bool = False) -> tuple[str | bool, KernelPlan | None]:
    """fp32 on a CPU: linear layers that run MKL or foretell's GEMM (oneDNN pre-packed where it cannot be
    built) by the pass's size; bf16 on a CPU: oneDNN's bf16 GEMM or foretell's (VDPBF16PS with AVX512-BF16);
    one :class:`KernelPlan` per model, measured with the cost curve (``lean``: bf16 weights only, see
    :func:`row_dispatch_cpu_linears`); or oneDNN packed everywhere
    (``EngineConfig.cpu_linears="packed"``: one copy of the weights). Exact mode sets up its own (see
    :class:`foretell.engine.runner.ModelRunner`). Returns what the cost cache's key records (False where nothing
    was swapped) and the plan."""
    if packed_only:
        return prepack_cpu_linears(model) > 0, None
    # The output head gets both kernels too, tied or not (the GGUF models here have their own output matrix).
    # With oneDNN it bought 2-3-row passes 7% less time (104.4 vs 111.8 ms, whole model); with foretell's
    # kernel on bf16 weights MKL never wins there, and the head keeps only its bf16 copy.
    plan = row_dispatch_cpu_linears(model, own_gemm=True, lean=lean)
    if plan is None:
        return False, None
    return ("dispatch" if plan.kernel == "packed" else f"dispatch+{plan.kernel}"), plan


def prompt_kernel_rows(runner: ModelRunner, cost: CostModel, config: EngineConfig,
                       measure: Callable[[], int] | None = None) -> int:
    """How many rows a prompt chunk may have and still run on exact mode's kernel (``KVPool.kernel_rows``); 0
    outside exact mode on foretell's kernel. Auto (``config.exact_prompt_kernel_rows`` None): every chunk where
    the kernel runs on AMX tiles (a 2-core Sapphire Rapids, the 0.5B: 0.43x the time of the library route for a
    16-token prompt, 0.48x for 64, 0.66x for 128, 0.82x for 256, 0.90x for 384 and 511); elsewhere what
    ``measure`` finds (:func:`foretell.engine.cost.cached_prompt_kernel_rows`: both routes timed, where the cost
    curve is measured), else the chunks whose kernel pass costs at most two one-token passes on the cost curve,
    as the library route costs at least that: one read of the weights for the chunk and another for the rows that
    need logits."""
    if not (runner.exact and runner.exact_kernel and runner.attention_kernel is not None):
        return 0
    if config.exact_prompt_kernel_rows is not None:
        return config.exact_prompt_kernel_rows
    if runner.kernel_on_amx:
        return config.prefill_chunk
    if measure is not None:
        return measure()
    cheap = cost.span(1, config.prefill_chunk) <= 2.0  # passes of the prompt's last token + 0, 1, ... chunk rows
    return config.prefill_chunk if cheap.all() else max(0, int(cheap.argmin()) - 1)


def _max_model_len(model, config: EngineConfig) -> int:
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    native = getattr(cfg, "max_position_embeddings", None) or 32768
    return min(config.max_model_len or min(native, 32768), native)


def _eos_ids(model, tokenizer) -> frozenset[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return frozenset(ids)

