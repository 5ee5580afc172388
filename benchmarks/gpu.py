"""The embedded engine on a CUDA GPU, with the real models' shapes: cost curve, ceiling, speedups, identity.

No weights can reach the lent GPU machines (no network there, and a transfer carries 64 MiB at most), so each
model is built there from its config with random weights (``--config-dir``: the default model's config and
tokenizer; the 1.5B's shapes are Qwen2.5-1.5B's), saved, and loaded through ``LLMEngine.from_config``, the
path ``foretell serve --device cuda`` takes, cost-curve measurement included. What this measures: forward-pass
cost over n tokens, the ceiling it allows a perfect prediction, the engine's per-step overhead, and what
perfect, edited, garbage and half predictions and n-gram lookup do against plain decoding, alone and 8 requests
at once. Not acceptance on real edits (random weights write noise).

``--sampling greedy`` (the default) or ``seeded`` (temperature 1, a seed per request). A random model's
greedy output soon loops on a few tokens, which n-gram lookup drafts for free, so its n-gram figures say
nothing about real text; seeded sampling writes varied tokens, and gives the same tokens with and without
speculation, but over a random model's nearly flat distribution (151,936 tokens) a last-bit difference between
a one-token and a k-token pass moves the sample: in bf16 it does, often, so use it in fp32. Either way a
perfect prediction is the plain run's own output, and every run is checked token for token against plain
decoding.

    python benchmarks/gpu.py --config-dir DIR --out OUT       # on a machine with a CUDA GPU

Writes ``<out>/gpu.json`` and ``<out>/gpu.md`` (rewritten after each model, so a run cut short keeps what
it measured).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from exact import pass_times  # noqa: E402

from foretell.bench.report import cost_ceiling  # noqa: E402
from foretell.config import EngineConfig, SamplingParams, SpeculationParams  # noqa: E402
from foretell.engine.api import GenerationRequest  # noqa: E402
from foretell.engine.cost import synchronize  # noqa: E402
from foretell.engine.llm_engine import LLMEngine  # noqa: E402
from foretell.engine.runner import ExactModeUnavailable, ModelRunner  # noqa: E402

SHAPES = {  # Qwen2.5(-Coder) 0.5B is the carried config itself; 1.5B differs in these fields
    "0.5b": {},
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2),
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")
METHODS = ("plain", "ngram", "perfect", "edited", "garbage", "half")


def build_model_dir(config_dir: Path, shape: str, dtype: torch.dtype, root: Path, device: str) -> Path:
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(config_dir)
    for key, value in SHAPES[shape].items():
        setattr(config, key, value)
    config.layer_types = ["full_attention"] * config.num_hidden_layers
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    out = root / f"random-qwen2.5-{shape}"
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        if (config_dir / name).exists():
            shutil.copy(config_dir / name, out / name)
    del model
    return out


def edited(tokens: list[int], vocab: int, rng: random.Random) -> list[int]:
    """Three spans of 4 tokens replaced, at a quarter, half and three quarters of the output."""
    out = list(tokens)
    for frac in (0.25, 0.5, 0.75):
        i = int(len(out) * frac)
        out[i:i + 4] = [rng.randrange(vocab) for _ in range(4)]
    return out


def prediction_for(method: str, plain: list[int], vocab: int, rng: random.Random) -> tuple[int, ...] | None:
    if method in ("plain", "ngram"):
        return None
    if method == "edited":
        return tuple(edited(plain, vocab, rng))
    if method == "garbage":
        return tuple(rng.randrange(vocab) for _ in plain)
    return tuple(plain if method == "perfect" else plain[: len(plain) // 2])  # perfect, half


def generate(engine: LLMEngine, reqs: list[GenerationRequest]) -> tuple[float, dict[str, list[int]], dict[str, int]]:
    synchronize(engine.runner.device)
    start = time.perf_counter()
    outs = engine.generate(reqs)
    synchronize(engine.runner.device)
    seconds = time.perf_counter() - start
    tokens = {rid: [t for c in chunks for t in c.new_token_ids] for rid, chunks in outs.items()}
    passes = {rid: chunks[-1].stats.forward_passes for rid, chunks in outs.items()}
    return seconds, tokens, passes


def sampling_params(args, seed: int) -> SamplingParams:
    return SamplingParams(temperature=0.0) if args.sampling == "greedy" else SamplingParams(temperature=1.0, seed=seed)


def request(rid: str, prompt: list[int], max_tokens: int, sampling: SamplingParams, method: str,
            prediction: tuple[int, ...] | None) -> GenerationRequest:
    spec = SpeculationParams(prediction=prediction,
                             method={"plain": "none", "ngram": "ngram"}.get(method, "auto"))
    return GenerationRequest(prompt_ids=list(prompt), max_tokens=max_tokens, sampling=sampling, speculation=spec,
                             ignore_eos=True, request_id=rid)


def measure_model(model_dir: Path, args) -> dict:
    from foretell.bench.workloads import WorkloadOptions, realedit_tasks

    engine, name = LLMEngine.from_config(EngineConfig(model=str(model_dir), device=args.device, dtype=args.dtype,
                                                      prefix_cache=False))
    vocab = engine.runner.vocab_size
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    times = pass_times({"default": engine}, sizes, args.context, args.rounds)["default"]
    ceiling, best_k = cost_ceiling({"cost_curve": engine.cost.points,
                                    "engine_config": {"k_max": engine.config.k_max}})
    prompts = [t.prompt_ids for t in realedit_tasks(engine.tokenizer, WorkloadOptions())][: args.prompts]
    rng = random.Random(0)
    rows = []
    for i, prompt in enumerate(prompts):
        sampling = sampling_params(args, 1000 + i)
        generate(engine, [request("warm", prompt, 8, sampling, "plain", None)])
        row: dict = {"prompt_tokens": len(prompt), "max_tokens": args.max_tokens}
        plain_tokens = None
        for method in METHODS:
            pred = prediction_for(method, plain_tokens, vocab, rng)
            seconds, tokens, passes = generate(engine, [request("r", prompt, args.max_tokens, sampling, method, pred)])
            plain_tokens = plain_tokens or tokens["r"]
            row.setdefault("distinct_tokens", len(set(plain_tokens)))
            row[method] = {"seconds": seconds, "passes": passes["r"], "tokens": len(tokens["r"]),
                           "identical": tokens["r"] == plain_tokens}
        rows.append(row)
        print(name, i, {m: (round(row[m]["seconds"], 2), row[m]["passes"], row[m]["identical"]) for m in METHODS},
              flush=True)
    batch = batched(engine, prompts, args)
    greedy = greedy_identity(engine, prompts[0], args.max_tokens) if args.sampling == "seeded" else None
    exact = exact_probe(engine)
    return {"model": name, "dtype": str(engine.runner.kv_shape.dtype).removeprefix("torch."),
            "pass_seconds": times, "cost_curve": engine.cost.points, "ceiling": ceiling, "ceiling_k": best_k,
            "k_max": engine.config.k_max, "tasks": rows, "batch": batch, "greedy": greedy, "exact": exact}


def batched(engine: LLMEngine, prompts: list[list[int]], args) -> dict:
    """8 requests at once (the prompts, each with its own seed), plain and with perfect predictions."""
    reqs = [(str(j), prompts[j % len(prompts)], sampling_params(args, 2000 + j)) for j in range(8)]
    plain_s, plain, plain_passes = generate(engine, [request(r, p, args.max_tokens, s, "plain", None)
                                                     for r, p, s in reqs])
    pred_s, got, pred_passes = generate(engine, [request(r, p, args.max_tokens, s, "perfect", tuple(plain[r]))
                                                 for r, p, s in reqs])
    return {"requests": 8, "plain_seconds": plain_s, "perfect_seconds": pred_s, "identical": got == plain,
            "tokens": sum(len(t) for t in plain.values()), "plain_passes": max(plain_passes.values()),
            "perfect_passes": max(pred_passes.values())}


def greedy_identity(engine: LLMEngine, prompt: list[int], max_tokens: int) -> dict:
    greedy = SamplingParams(temperature=0.0)
    _, plain, _ = generate(engine, [request("g", prompt, max_tokens, greedy, "plain", None)])
    _, got, passes = generate(engine, [request("g", prompt, max_tokens, greedy, "perfect", tuple(plain["g"]))])
    a, b = plain["g"], got["g"]
    first = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return {"identical": a == b, "first_difference": first, "tokens": len(a), "distinct_tokens": len(set(a)),
            "passes": passes["g"]}


def exact_probe(engine: LLMEngine) -> str:
    try:
        ModelRunner(engine.runner.model, exact=True)
    except ExactModeUnavailable as exc:
        return f"refused: {exc}"
    return "accepted"


def report(result: dict) -> str:
    meta = result["meta"]
    lines = [f"foretell's embedded engine on {meta['gpu']} (torch {meta['torch']}), random weights in the "
             f"models' shapes, {meta['max_tokens']} tokens per request, {meta['sampling']}.", ""]
    for m in result["models"]:
        times = m["pass_seconds"]
        t1 = times[1] if 1 in times else times["1"]
        lines += [f"## {m['model']} ({m['dtype']})", "",
                  "Forward pass over n new tokens after " f"{meta['context']} cached (fastest of the rounds):", "",
                  "| n | ms | × one token |", "|---|---|---|"]
        lines += [f"| {n} | {1e3 * s:.1f} | {s / t1:.2f} |" for n, s in times.items()]
        lines += ["", f"Cost curve the engine measured at start-up: {m['cost_curve']}; ceiling for a perfect "
                      f"prediction: {m['ceiling']:.1f}× at k = {m['ceiling_k']} (k_max {m['k_max']}).", "",
                  "Wall seconds, forward passes and speedup over plain decoding per request:", "",
                  "| prompt tokens (distinct output tokens) | " + " | ".join(METHODS) + " |",
                  "|---" * (len(METHODS) + 1) + "|"]
        speedups = {method: [] for method in METHODS}
        for row in m["tasks"]:
            cells = []
            for method in METHODS:
                r = row[method]
                speedups[method].append(row["plain"]["seconds"] / r["seconds"])
                mark = "" if r["identical"] else " **differs**"
                cells.append(f"{r['seconds']:.2f} s, {r['passes']} passes, {speedups[method][-1]:.2f}×{mark}")
            lines.append(f"| {row['prompt_tokens']} ({row['distinct_tokens']}) | " + " | ".join(cells) + " |")
        geo = {k: statistics.geometric_mean(v) for k, v in speedups.items()}
        perfect = [row["plain"]["seconds"] / row["perfect"]["seconds"] for row in m["tasks"]]
        b, g = m["batch"], m["greedy"]
        per_step = statistics.median(row["plain"]["seconds"] / row["plain"]["passes"] for row in m["tasks"])
        lines += ["", f"Plain decoding: {1e3 * per_step:.1f} ms per pass (prefill included) against "
                      f"{1e3 * t1:.1f} ms for a one-token forward pass alone.",
                  "Geomean speedup over plain decoding: " + ", ".join(f"{k} {v:.2f}×" for k, v in geo.items()),
                  f"Perfect prediction: {statistics.geometric_mean(perfect):.1f}× plain (wall, prefill included), "
                  f"{statistics.geometric_mean(perfect) / m['ceiling']:.2f} of the ceiling.",
                  f"8 requests at once: plain {b['plain_seconds']:.2f} s ({b['plain_passes']} passes), perfect "
                  f"predictions {b['perfect_seconds']:.2f} s ({b['perfect_passes']} passes), "
                  f"{b['plain_seconds'] / b['perfect_seconds']:.1f}×, identical: {b['identical']}.",
                  *([] if g is None else [
                      f"Greedy in {m['dtype']}, with its own output as the prediction: identical {g['identical']} "
                      f"(first difference at {g['first_difference']}; {g['tokens']} tokens, {g['distinct_tokens']} "
                      f"distinct, {g['passes']} passes)."]),
                  f"Exact mode's start-up probe on this GPU: {m['exact']}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config-dir", required=True, help="config.json and tokenizer files of the default model")
    p.add_argument("--models", default="0.5b,1.5b")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--sampling", choices=("greedy", "seeded"), default="greedy")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--prompts", type=int, default=3)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default="benchmarks/results/gpu")
    p.add_argument("--device", default="cuda", help="cpu: a dry run of this script on a machine without a GPU")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmarks/gpu.py needs a CUDA device (--device cpu for a dry run)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu", "torch": torch.__version__,
            "max_tokens": args.max_tokens, "sampling": args.sampling, "context": args.context, "argv": argv or sys.argv[1:]}
    result = {"meta": meta, "models": []}
    dtype = getattr(torch, args.dtype)
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.models.split(","):
            model_dir = build_model_dir(Path(args.config_dir), shape, dtype, Path(tmp), args.device)
            result["models"].append(measure_model(model_dir, args))
            shutil.rmtree(model_dir)
            (out / "gpu.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
            (out / "gpu.md").write_text(report(result))
            print(report(result), flush=True)


if __name__ == "__main__":
    main()
