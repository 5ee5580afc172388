"""foretell's CPU attention for the queries that need logits (``cpu_gemm.c``) against SDPA, per layer call.

For n queries at the end of ``--keys`` cached keys (causal), ms per call (median of ``--rounds``):

- ``sdpa``: one SDPA call for the n queries with a causal mask (the default mode before the kernel; for one
  query, the query heads packed per KV head as the runner does);
- ``sdpa/query``: one SDPA call per query (exact mode's route without the kernel: a query's result must not
  depend on the pass);
- ``kernel``: one call of foretell's kernel for the n queries (each computed alone, in a fixed order).

    flock /tmp/foretell-heavy.lock .venv/bin/python benchmarks/cpu_attention.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from foretell.engine import cpu_gemm
from foretell.engine.runner import _attend


def _ms(fn, rounds: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", type=int, default=14)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--keys", type=int, nargs="+", default=[1100, 4000])
    p.add_argument("--queries", type=int, nargs="+", default=[1, 8, 32, 64, 128])
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args(argv)
    gemm = cpu_gemm.load()
    if gemm is None:
        raise SystemExit("foretell's CPU kernel does not build here")
    dtype = getattr(torch, args.dtype)
    scale = args.head_dim ** -0.5
    gen = torch.Generator().manual_seed(0)
    print(f"{args.heads} query heads, {args.kv_heads} KV heads, {args.head_dim} dims, {args.dtype}, "
          f"{torch.get_num_threads()} threads; ms per call (median of {args.rounds})\n")
    print("| keys | queries | sdpa | sdpa/query | kernel | sdpa / kernel |\n|---|---|---|---|---|---|")
    for length in args.keys:
        cap = length + 64
        keys, values = (torch.randn(args.kv_heads, cap, args.head_dim, generator=gen).to(dtype) for _ in range(2))
        for n in args.queries:
            query = torch.randn(1, args.heads, n, args.head_dim, generator=gen).to(dtype)
            ends = list(range(length - n + 1, length + 1))
            mask = None if n == 1 else torch.arange(length)[None, :] < torch.tensor(ends)[:, None]
            k, v = keys[None, :, :length], values[None, :, :length]
            sdpa = _ms(lambda: _attend(query, k, v, mask, scale), args.rounds)
            per_query = _ms(lambda: [_attend(query[:, :, j : j + 1], keys[None, :, :e], values[None, :, :e], None, scale)
                                     for j, e in enumerate(ends)], args.rounds)
            kernel = _ms(lambda: gemm.attention(query[0], keys, values, [0] * n, ends, scale), args.rounds)
            print(f"| {length} | {n} | {sdpa:.3f} | {per_query:.3f} | {kernel:.3f} | {sdpa / kernel:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
