"""Exact mode's routes on a GPU, with the default model's shapes: is a position's logits bit-identical in a
verify pass of k tokens and in one-token passes, and what does each route cost?

Routes (each on its own copy of one random-weight model in Qwen2.5-Coder-0.5B's shapes, bf16):

- ``default``: no exact mode (the reference for speed);
- ``pad2``: exact mode's CPU route without foretell's kernel, used on GPUs until 2026-11-25: one-row linear
  calls padded to two rows, every other call as it comes;
- ``fixedN``: every linear layer and RMSNorm on blocks of exactly N rows (:class:`FixedRows`);
- ``engine``: what ``ModelRunner(model, exact=True)`` builds here (its start-up probe included).

For each route: the k in ``--ks`` whose verify-pass logits differ from one-token passes, a pass beside
another request's prompt chunk, and the fastest of several passes over 1 and over 129 tokens after 1,024
cached ones. No weights or downloads: the model is built from its config with random weights.

    python benchmarks/gpu_exact.py --out OUT          # on a machine with a CUDA GPU
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import time
from pathlib import Path

import torch

from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import ModelRunner, Segment, _hook_linears, fix_rows

QWEN_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True)


def build_model(layers: int, device: str, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    config = Qwen2Config(**{**QWEN_05B, "num_hidden_layers": layers}, initializer_range=0.02)
    return AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval()


def route(model, name: str) -> ModelRunner:
    if name == "engine":
        return ModelRunner(model, exact=True)
    runner = ModelRunner(model)
    if name == "pad2":
        _hook_linears(runner.model)
    elif name.startswith("fixed"):
        fix_rows(runner.model, int(name[len("fixed"):]))
    runner.exact = name != "default"
    return runner


def prefill(runner: ModelRunner, kv: SeqKV, tokens: list[int], chunk: int = 64) -> None:
    for i in range(0, len(tokens), chunk):
        part = tokens[i:i + chunk]
        runner.forward([Segment(kv, part, num_logits=0)])
        kv.length += len(part)


def identity(runner: ModelRunner, ks: list[int], prompt: list[int], follow: list[int]) -> dict:
    def new_kv():
        kv = SeqKV(runner.kv_shape, 64, len(prompt) + len(follow) + 8)
        prefill(runner, kv, prompt[:-1])
        return kv

    kv, rows = new_kv(), []
    for token in [prompt[-1]] + follow:  # the reference: one token per pass, as plain decoding runs
        rows.append(runner.forward([Segment(kv, [token], num_logits=1)])[0])
        kv.length += 1
    reference = torch.cat(rows)
    differ = []
    for k in ks:
        logits = runner.forward([Segment(new_kv(), [prompt[-1]] + follow[:k], num_logits=k + 1)])[0]
        if not torch.equal(logits, reference[:k + 1]):
            differ.append(k)
    other = [5 + i for i in range(40)]
    kv_other = SeqKV(runner.kv_shape, 64, 256)
    _, logits = runner.forward([Segment(kv_other, other, num_logits=0),
                                Segment(new_kv(), [prompt[-1]] + follow[:20], num_logits=21)])
    return {"k_differing": differ, "beside_a_prompt_chunk_equal": bool(torch.equal(logits, reference[:21]))}


def pass_ms(runner: ModelRunner, sizes: list[int], context: int = 1024, rounds: int = 5) -> dict[int, float]:
    kv = SeqKV(runner.kv_shape, context + max(sizes), context + max(sizes))
    gen = torch.Generator().manual_seed(0)
    prefill(runner, kv, torch.randint(0, runner.vocab_size, (context,), generator=gen).tolist(), 512)
    best = {n: float("inf") for n in sizes}
    for r in range(rounds + 1):
        for n in sizes:
            tokens = torch.randint(0, runner.vocab_size, (n,), generator=gen).tolist()
            torch.cuda.synchronize()
            start = time.perf_counter()
            runner.forward([Segment(kv, tokens, num_logits=n)])
            torch.cuda.synchronize()
            if r:
                best[n] = min(best[n], (time.perf_counter() - start) * 1000)
    return {n: round(ms, 2) for n, ms in best.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--routes", default="default,pad2,fixed32,fixed64,fixed128,engine")
    ap.add_argument("--ks", default="1,2,3,7,16,33,64,100,128")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    base = build_model(args.layers, args.device, torch.bfloat16)
    rng = random.Random(0)
    prompt = [rng.randrange(QWEN_05B["vocab_size"]) for _ in range(301)]
    follow = [rng.randrange(QWEN_05B["vocab_size"]) for _ in range(max(ks + [20]))]  # the pass beside a chunk drafts 20
    results = {"device": torch.cuda.get_device_name(0) if args.device == "cuda" else args.device,
               "torch": torch.__version__, "layers": args.layers, "routes": {}}
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.routes.split(","):
        try:
            runner = route(copy.deepcopy(base), name)
        except Exception as exc:  # the engine route's probe may refuse this GPU: that is a result too
            results["routes"][name] = {"refused": f"{type(exc).__name__}: {exc}"}
            print(name, "refused:", exc, flush=True)
            continue
        row = identity(runner, ks, prompt, follow) if name != "default" else {}
        row["pass_ms"] = pass_ms(runner, [1, 129]) if args.device == "cuda" else {}
        results["routes"][name] = row
        print(name, row, flush=True)
        del runner
        torch.cuda.empty_cache() if args.device == "cuda" else None
        (args.out / "gpu_exact.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
