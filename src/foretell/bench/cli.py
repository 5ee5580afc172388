"""``foretell bench``: measure foretell against plain decoding and peers; write JSON, markdown and plots.

    foretell bench                                   # everything, default model, --dtype auto
    foretell bench --suite verbatim,edit --max-tokens 256
    foretell bench --suite corpus --record           # also store the model's outputs for the simulator
    foretell bench --tiny --out /tmp/bench           # tiny random model: the CI smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from foretell.bench.workloads import DEFAULT_SUITES, SUITES
from foretell.integrations.vllm.serve import DEFAULT_K as VLLM_FORETELL_K

DEFAULT_OUT = Path("benchmarks/results")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="foretell bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="'default' (packaged Qwen2.5-Coder-0.5B-Instruct), a Hugging Face "
                   "directory or a .gguf file (default: the packaged default model)")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"],
                   help="auto (default) = bfloat16 on GPUs and on CPUs with native bf16 (AVX512-BF16/AMX), float32 "
                        "elsewhere: emulated bf16 is ~20x slower than fp32 on an AVX2-only CPU")
    p.add_argument("--suite", default=",".join(DEFAULT_SUITES),
                   help=f"comma-separated suites out of {','.join(SUITES)} (default: all but longfile); 'peers' adds HF "
                        "transformers generate (plain and prompt lookup) to every task, and vLLM if .venv-vllm exists")
    p.add_argument("--max-tokens", type=int, default=None, help="cap on every request's max_tokens")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="at most N tasks per suite")
    p.add_argument("--tasks", default=None, metavar="NAMES",
                   help="comma-separated task names (json_edit, realedit/json_edit) or globs (realedit/*): run only "
                        "those (applied after --limit)")
    p.add_argument("--tiny", action="store_true", help="tiny random fp32 model, a few tokens: the CI smoke run")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default: {DEFAULT_OUT})")
    p.add_argument("--record", nargs="?", const="", default=None, metavar="PATH",
                   help="write the model's outputs (token ids + text, model, dtype) for the simulator; default path "
                        "src/foretell/bench/data/recorded_outputs.json (OUT/recorded_outputs.json with --tiny)")
    p.add_argument("--record-only", action="store_true",
                   help="with --record: run only plain decoding of the verbatim/edit/corpus tasks and write the "
                        "recording (no comparisons, no report)")
    p.add_argument("--replay", nargs="?", const="", default=None, metavar="PATH",
                   help="no model: simulated alignment (ours vs oracle vs baselines) on recorded real outputs "
                        "(default: the packaged recording); writes OUT/replay.json and OUT/replay.md")
    p.add_argument("--peers-on", default="verbatim,edit,corpus,realedit",
                   help="suites whose tasks also run the HF peers when 'peers' is selected (default: %(default)s)")
    p.add_argument("--profile", action="store_true",
                   help="time each engine step's phases (forward, verify, propose, other)")
    p.add_argument("--k-max", type=int, default=None, help="engine k_max (default: the engine's)")
    p.add_argument("--fixed-k", action="store_true", help="disable adaptive k (propose min(k_max, available))")
    exact = p.add_mutually_exclusive_group()
    exact.add_argument("--exact", dest="exact", action="store_const", const=True, default=None,
                       help="the engine in exact (batch-invariant) mode (default: the engine's choice, "
                       "see `foretell serve --help`)")
    exact.add_argument("--no-exact", dest="exact", action="store_const", const=False, help="exact mode off")
    int8 = p.add_mutually_exclusive_group()
    int8.add_argument("--int8-linears", dest="int8_linears", action="store_const", const=True, default=None,
                      help="exact mode's int8 products on GGUF blocks on (default: the engine's choice, see `foretell "
                      "serve --help`)")
    int8.add_argument("--no-int8-linears", dest="int8_linears", action="store_const", const=False,
                      help="exact mode's int8 products off: the bf16 weights' route")
    p.add_argument("--repeat", type=_at_least_one, default=1,
                   help="runs per task of n-gram lookup and of foretell (interleaved; plain runs once): the median run is "
                        "reported with every run's wall time beside it (default 1)")
    p.add_argument("--cost-curve", choices=["measured", "reference"], default="measured",
                   help="verify-cost curve for adaptive k: the engine's start-up measurement (cached per machine) "
                        "or the reference curve from REFERENCE §4")
    p.add_argument("--concurrency", default="1,4,8", help="simultaneous requests for the concurrency suite")
    p.add_argument("--concurrency-max-tokens", type=int, default=256)
    p.add_argument("--engine", choices=["embedded", "vllm"], default="embedded",
                   help="vllm: also run the verbatim/edit/real-edit tasks and the largest concurrency level on vLLM plain, "
                        "vLLM ngram (file in the prompt) and vLLM + foretell's plugin (needs .venv-vllm, see "
                        "docs/VLLM.md); the embedded engine runs beside it as usual")
    p.add_argument("--vllm-k", type=int, default=32, help="vLLM ngram's num_speculative_tokens (default 32)")
    p.add_argument("--vllm-foretell-k", type=int, default=VLLM_FORETELL_K,
                   help=f"num_speculative_tokens of vLLM + foretell's plugin (default: scripts/serve's, {VLLM_FORETELL_K})")
    p.add_argument("--temperature", type=_temperature, default=0.0,
                   help="0 = greedy (default); above 0: seeded sampling, the same tokens with and without "
                        "speculation (HF and vLLM peers are skipped)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed with --temperature")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def _parse_suites(text: str) -> tuple[str, ...]:
    suites = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise SystemExit(f"foretell bench: unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    return suites


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def _temperature(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 2.0:
        raise argparse.ArgumentTypeError("must be between 0 and 2")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.temperature and (args.record is not None or args.record_only):
        parser.error("--record keeps greedy outputs for the simulator: run it without --temperature")
    if args.temperature and args.engine == "vllm":
        parser.error("--engine vllm compares greedy outputs only (vLLM's sampled tokens change with speculation): "
                     "run it without --temperature")
    if args.replay is not None:
        return replay(args.replay or None, args.out)
    from foretell.bench.harness import BenchOptions, BenchUsageError, default_record_path, run_benchmark
    from foretell.bench.report import write_all

    opts = BenchOptions(
        suites=_parse_suites(args.suite),
        model=args.model,
        dtype=args.dtype,
        max_tokens=args.max_tokens,
        limit=args.limit,
        tasks=tuple(t.strip() for t in (args.tasks or "").split(",") if t.strip()),
        tiny=args.tiny,
        out=args.out,
        profile=args.profile,
        k_max=args.k_max,
        adaptive_k=not args.fixed_k,
        exact=args.exact,
        int8_linears=args.int8_linears,
        cost_curve=args.cost_curve,
        peers_on=tuple(s.strip() for s in args.peers_on.split(",") if s.strip()),
        record_only=args.record_only,
        concurrency=tuple(int(n) for n in args.concurrency.split(",") if n.strip()),
        concurrency_max_tokens=args.concurrency_max_tokens,
        engine=args.engine,
        vllm_k=args.vllm_k,
        vllm_foretell_k=args.vllm_foretell_k,
        repeat=args.repeat,
        temperature=args.temperature,
        seed=args.seed,
        progress=not args.no_progress and sys.stderr.isatty(),
        argv=list(sys.argv[1:] if argv is None else argv),
    )
    if not args.tiny and args.dtype == "bfloat16":
        from foretell.bench.harness import native_bf16

        if native_bf16() is False:
            print("foretell bench: warning: this CPU has no native bf16; bf16 runs are emulated and ~20x slower "
                  "than float32 (use --dtype auto or float32)", file=sys.stderr)
    if args.record is not None:
        opts.record = Path(args.record) if args.record else default_record_path(opts)
    if args.record_only and args.record is None:
        opts.record = default_record_path(opts)
    try:
        result = run_benchmark(opts)
    except BenchUsageError as exc:
        raise SystemExit(f"foretell bench: {exc}") from None
    if args.record_only:
        print(f"foretell bench: recorded {len(result['tasks'])} plain outputs of {result['meta']['model']} "
              f"({result['meta']['dtype']}) to {opts.record}")
        return 0
    paths = write_all(result, opts.out)
    print(_console_summary(result))
    for kind, path in paths.items():
        print(f"  {kind:28s} {path}")
    return 0


def replay(path: str | None, out: Path) -> int:
    """Alignment efficiency on a recording made with --record (token level, the model's real outputs)."""
    from foretell.bench.harness import alignment
    from foretell.bench.report import _f, _pooled_alignment, _table
    from foretell.bench.workloads import RECORDED_PATH, load_recorded_outputs, recorded_token_text

    try:
        recorded = load_recorded_outputs(path)
    except FileNotFoundError:
        print(f"foretell bench: no recording at {path or RECORDED_PATH}; make one with --record", file=sys.stderr)
        return 1
    text = recorded_token_text(recorded)
    rows = [{**{k: t[k] for k in ("name", "suite", "kind")},
             "alignment": alignment(t["prediction_ids"], t["output_ids"], text)} for t in recorded["tasks"]]
    pooled = {suite: _pooled_alignment([r for r in rows if r["suite"] == suite])
              for suite in dict.fromkeys(r["suite"] for r in rows)}
    lines = [f"# Alignment on recorded outputs: {recorded['model']} ({recorded['dtype']}), {recorded.get('created')}",
             "", "Simulated passes (k = 64) on (prediction, the model's real plain output); efficiency = oracle "
             "passes / passes.", ""]
    lines += _table(["task", "oracle", "ours", "eff", "first-div eff", "line eff"],
                    [[r["name"], str(a.get("oracle_passes")), str(a.get("ours_passes")), _f(a.get("efficiency")),
                      _f(a.get("first_divergence_efficiency")), _f(a.get("line_based_efficiency"))]
                     for r in rows if (a := r["alignment"] or {})])
    lines += ["", "Pooled per suite (Σ oracle passes / Σ passes):", ""]
    lines += _table(["suite", "tasks", "ours", "first-div", "line"],
                    [[s, str(p.get("pairs")), _f(p.get("efficiency")), _f(p.get("first_divergence_efficiency")),
                      _f(p.get("line_based_efficiency"))] for s, p in pooled.items() if p])
    out.mkdir(parents=True, exist_ok=True)
    (out / "replay.json").write_text(json.dumps({"model": recorded["model"], "dtype": recorded["dtype"],
                                                  "tasks": rows, "pooled": pooled}, indent=1) + "\n")
    (out / "replay.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def _console_summary(result: dict) -> str:
    from foretell.bench.report import _f, _x

    meta, summary = result["meta"], result["summary"]
    lines = [f"foretell bench: {meta['model']} {meta['dtype']} on {meta['machine']['cpu']} "
             f"({meta['machine']['cores']} cores), {meta['duration_s']:.0f} s"]
    for r in result["tasks"]:
        a = r.get("alignment") or {}
        lines.append(f"  {r['name']:42s} {r['output_tokens']:5d} tok  speedup {_x(r['speedup']):>8s}  "
                     f"vs n-gram {_x(r.get('speedup_vs_ngram')):>7s}  "
                     f"oracle eff {_f((r.get('copy_oracle') or {}).get('efficiency')):>5s}  "
                     f"accept {_f(r['acceptance_rate']):>5s}  align {_f(a.get('efficiency')):>5s}  "
                     f"HF PLD {_x(r.get('hf_prompt_lookup_speedup')):>7s}  "
                     f"identical {'yes' if r['identical'] else 'NO'}")
    for r in result.get("concurrency") or []:
        lines.append(f"  concurrency {r['n']} {r['mode']:10s} {r['agg_tok_s']:8.1f} tok/s "
                     f"{'vs plain ' + _x(r.get('speedup_vs_plain')) if r['mode'] != 'plain' else ''}"
                     f"{'  vs n-gram ' + _x(r.get('speedup_vs_ngram')) if r['mode'] == 'prediction' else ''}")
    ve = result.get("vllm_engine") or {}
    for r in ve.get("tasks", []):
        runs = r["runs"]
        lines.append(f"  vLLM {r['name']:37s} {r['output_tokens']:5d} tok  plain {_f(runs['plain']['tok_s'], 1):>6s} "
                     f"ngram {_f(runs['ngram']['tok_s'], 1):>6s} foretell {_f(runs['foretell']['tok_s'], 1):>6s} tok/s  "
                     f"foretell/ngram {_x(r['foretell_vs_ngram']):>7s}  identical "
                     f"{'yes' if runs['foretell']['identical_vs_vllm_plain'] else 'NO'}")
    for c in ve.get("concurrency", []):
        lines.append(f"  vLLM concurrency {c['n']} {c['mode']:9s} {c['agg_tok_s']:8.1f} tok/s "
                     f"vs ngram {_x(c.get('speedup_vs_vllm_ngram'))}")
    for t in (ve.get("summary") or {}).get("targets", []):
        state = "met" if t["met"] else ("SHORT" if t["met"] is False else "n/a")
        lines.append(f"  vLLM target {t['target']}: {_f(t['measured'])} ({state})")
    for t in summary.get("targets", []):
        state = "met" if t["met"] else ("SHORT" if t["met"] is False else "n/a")
        lines.append(f"  target {t['target']}: {_f(t['measured'])} ({state})")
    for note in result.get("notes", []):
        lines.append(f"  note: {note}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
