"""Benchmark output: ``results.json``, ``results.md`` (tables + targets) and PNG plots (matplotlib Agg).

Summary numbers are geometric means of per-task ratios; alignment efficiency over a suite is pooled
(Σ oracle passes / Σ our passes, the simulator's definition applied to the whole suite).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

PLOTS = ("speedup_vs_acceptance.png", "snake_tokens_over_time.png", "concurrency.png")

TARGETS = {
    "verbatim": 30.0,  # × plain, decode tok/s
    "ceiling": 0.8,  # perfect prediction: decode speedup / max_k (k + 1) / c(k + 1)
    "corpus_alignment": 0.90,
    "edit_vs_hf_prompt_lookup": 1.5,
    "realedit_vs_ngram": 1.5,  # real edits, geomean wall time without the prediction / with it
    "garbage": 0.98,
    "vs_ngram": 0.98,
    "concurrency8": 1.0,
    "concurrency8_vs_ngram": 0.98,
}


# ------------------------------------------------------------------------------------------ summary


def geomean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _pooled_alignment(rows: list[dict]) -> dict[str, float | None]:
    aligned = [r["alignment"] for r in rows if r.get("alignment") and "oracle_passes" in r["alignment"]]
    if not aligned:
        return {}
    oracle = sum(a["oracle_passes"] for a in aligned)

    def pooled(key: str) -> float | None:
        passes = [a[key] for a in aligned if a.get(key) is not None]
        return oracle / sum(passes) if len(passes) == len(aligned) and sum(passes) else None

    return {"efficiency": pooled("ours_passes"), "mean_efficiency": _mean(a["efficiency"] for a in aligned),
            "first_divergence_efficiency": pooled("first_divergence_passes"),
            "line_based_efficiency": pooled("line_based_passes"), "pairs": len(aligned)}


def _suite_summary(rows: list[dict]) -> dict[str, Any]:
    return {
        "tasks": len(rows),
        "speedup_geomean": geomean(r["speedup"] for r in rows),
        "decode_speedup_geomean": geomean(r["decode_speedup"] for r in rows),
        "hf_prompt_lookup_speedup_geomean": geomean(r.get("hf_prompt_lookup_speedup") for r in rows),
        "vs_hf_prompt_lookup_geomean": geomean(r.get("vs_hf_prompt_lookup") for r in rows),
        "vs_ngram_geomean": geomean(r.get("speedup_vs_ngram") for r in rows),
        "vs_ngram_min": min((r["speedup_vs_ngram"] for r in rows if r.get("speedup_vs_ngram")), default=None),
        "copy_oracle_efficiency_mean": _mean((r.get("copy_oracle") or {}).get("efficiency") for r in rows),
        "copy_bound_vs_ngram_geomean": {label: geomean(_bound(r, label) for r in rows) for label in ("any", "runs4")},
        "policy_bounds_vs_ngram_geomean": {label: geomean(_policy_bound(r, label) for r in rows)
                                           for label in POLICY_BOUNDS},
        "acceptance_rate_mean": _mean(r["acceptance_rate"] for r in rows),
        "draft_acceptance_mean": _mean(r.get("draft_acceptance") for r in rows),
        "identical": sum(1 for r in rows if r["identical"]),
        "alignment": _pooled_alignment(rows),
    }


def _bound(row: dict[str, Any], label: str) -> float | None:
    """The task's copy bound over n-gram lookup (see :func:`foretell.bench.harness.copy_bound`), if measured."""
    return ((row.get("copy_bound") or {}).get(label) or {}).get("vs_ngram")


POLICY_BOUNDS = ("policy", "k", "source")


def _policy_bound(row: dict[str, Any], label: str) -> float | None:
    """The task's replayed policy (or a hindsight bound of it) over n-gram lookup's replay (see
    :func:`foretell.bench.harness.policy_bounds`), if there was a prediction."""
    return ((row.get("policy_bounds") or {}).get(label) or {}).get("vs_ngram")


def _policy_cell(row_or_summary: dict[str, Any], per_task: bool = True) -> str:
    """'policy / best k / best source' replayed over n-gram lookup as a table cell."""
    if per_task:
        values = [_policy_bound(row_or_summary, label) for label in POLICY_BOUNDS]
    else:
        geo = row_or_summary.get("policy_bounds_vs_ngram_geomean") or {}
        values = [geo.get(label) for label in POLICY_BOUNDS]
    return "–" if values[0] is None else " / ".join(_x(v) for v in values)


def _bounds(row_or_summary: dict[str, Any], per_task: bool = True) -> str:
    """'any / runs ≥ 4' copy bounds over n-gram lookup as a table cell."""
    if per_task:
        a, b = _bound(row_or_summary, "any"), _bound(row_or_summary, "runs4")
    else:
        geo = row_or_summary.get("copy_bound_vs_ngram_geomean") or {}
        a, b = geo.get("any"), geo.get("runs4")
    return "–" if a is None else f"{_x(a)} / {_x(b)}"


def cost_ceiling(meta: dict[str, Any]) -> tuple[float, int] | None:
    """(max over k <= k_max of (k + 1) / c(k + 1), that k): the decode speedup a perfect prediction allows
    on the run's cost curve (every pass verifies k tokens, all accepted, plus the target's own)."""
    points, k_max = meta.get("cost_curve"), (meta.get("engine_config") or {}).get("k_max")
    if not points or not k_max:
        return None
    from foretell.core.adaptive_k import CostModel

    cost = CostModel({int(n): float(r) for n, r in points.items()})
    ks = list(range(1, int(k_max) + 1))
    speedups = [(k + 1) / cost.ratio(k + 1) for k in ks]
    best = max(range(len(ks)), key=speedups.__getitem__)
    return speedups[best], ks[best]


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Per-suite summaries and the targets (each with measured value, threshold and whether it is met)."""
    rows = result["tasks"]
    suites = {s: [r for r in rows if r["suite"] == s] for s in dict.fromkeys(r["suite"] for r in rows)}
    summary: dict[str, Any] = {s: _suite_summary(rs) for s, rs in suites.items()}
    controls = suites.get("controls", [])
    for kind in ("no_prediction", "garbage", "empty", "first_half", "file", "prose_reply"):
        sel = [r for r in controls if r["kind"] == kind]
        if sel:
            summary.setdefault("controls", {})[f"{kind}_min_speedup"] = min(r["speedup"] for r in sel)
    conc = result.get("concurrency") or []
    for row in conc:
        if row["mode"] == "prediction":
            summary.setdefault("concurrency", {})[str(row["n"])] = row.get("speedup_vs_plain")
            if row.get("speedup_vs_ngram") is not None:
                summary.setdefault("concurrency_vs_ngram", {})[str(row["n"])] = row["speedup_vs_ngram"]

    targets = []

    def target(name: str, key: str, measured: float | None, detail: str = "") -> None:
        threshold = TARGETS[key]
        targets.append({"target": name, "threshold": threshold, "measured": measured,
                        "met": None if measured is None else measured >= threshold, "detail": detail})

    verb = [r for r in suites.get("verbatim", []) if r["kind"] == "verbatim"]
    if verb:
        r = verb[0]
        target("verbatim: decode tok/s ≥ 30× plain", "verbatim", r["decode_speedup"],
               f"end to end (prefill included) {_x(r['speedup'])}; acceptance {_f(r['acceptance_rate'])}")
    perfect = [r for r in suites.get("verbatim", []) if r["kind"] == "perfect"]
    ceiling = cost_ceiling(result["meta"])
    if perfect and ceiling:
        r, (ceil, best_k) = perfect[0], ceiling
        run = r["runs"]["foretell"]
        prefill = run["ttft_s"] / run["wall_s"] if run["wall_s"] else None
        summary["ceiling"] = {"ceiling": ceil, "k": best_k, "decode_speedup": r["decode_speedup"],
                              "share": r["decode_speedup"] / ceil if r["decode_speedup"] else None,
                              "wall_speedup": r["speedup"], "prefill_share": prefill}
        target(f"perfect prediction: decode speedup ≥ 0.8 of the cost curve's ceiling ({ceil:.1f}× at k = {best_k})",
               "ceiling", summary["ceiling"]["share"],
               f"decode {_x(r['decode_speedup'])}; end to end {_x(r['speedup'])}, time to first token "
               f"{_f(prefill)} of the wall time; {run['forward_passes']} passes for {r['output_tokens']} tokens")
    corpus = summary.get("corpus", {}).get("alignment", {})
    if corpus:
        target("edit corpus: alignment efficiency ≥ 0.90 (real outputs, vs oracle)", "corpus_alignment",
               corpus.get("efficiency"), f"mean per task {_f(corpus.get('mean_efficiency'))}; "
               f"first-divergence {_f(corpus.get('first_divergence_efficiency'))}, "
               f"line-based {_f(corpus.get('line_based_efficiency'))}; {corpus.get('pairs')} tasks")
    edit = summary.get("edit", {})
    if edit.get("vs_hf_prompt_lookup_geomean") is not None:
        corpus_vs = summary.get("corpus", {}).get("vs_hf_prompt_lookup_geomean")
        target("snake edits: wall-clock speedup ≥ 1.5× HF prompt lookup's", "edit_vs_hf_prompt_lookup",
               edit["vs_hf_prompt_lookup_geomean"],
               f"ours {_x(edit['speedup_geomean'])} vs HF prompt lookup {_x(edit['hf_prompt_lookup_speedup_geomean'])}"
               f" (geomeans, each vs its own plain); corpus: {_x(corpus_vs)}")
    real = summary.get("realedit", {})
    if real.get("vs_ngram_geomean") is not None:
        geo = real.get("copy_bound_vs_ngram_geomean") or {}
        target("real edits: geomean ≥ 1.5× the same server without the prediction (n-gram on) (wall)",
               "realedit_vs_ngram", real["vs_ngram_geomean"],
               f"a drafter that knew the output, copying from the prediction, the prompt or the output so far, "
               f"could reach at most {_x(geo.get('any'))} here on this run's cost curve, {_x(geo.get('runs4'))} "
               f"drafting only runs of 4 or more tokens (copy bound)")
    if "garbage_min_speedup" in summary.get("controls", {}):
        target("garbage prediction ≥ 0.98× plain (wall)", "garbage", summary["controls"]["garbage_min_speedup"],
               "worst of the garbage controls")
    vs_ngram = [r for r in rows if r.get("speedup_vs_ngram")]
    if vs_ngram:
        worst = min(vs_ngram, key=lambda r: r["speedup_vs_ngram"])
        target("with a prediction ≥ 0.98× the same server without one (n-gram on), every workload (wall)",
               "vs_ngram", worst["speedup_vs_ngram"], f"worst: {worst['name']}; {len(vs_ngram)} workloads")
    c8 = summary.get("concurrency", {}).get("8")
    if c8 is not None:
        target("8 concurrent requests: with predictions ≥ 1× plain decoding (aggregate tok/s)", "concurrency8", c8)
    c8_ngram = summary.get("concurrency_vs_ngram", {}).get("8")
    if c8_ngram is not None:
        target("8 concurrent requests: with predictions ≥ 0.98× the same server without them (n-gram on)",
               "concurrency8_vs_ngram", c8_ngram)
    summary["targets"] = targets
    return summary


# ------------------------------------------------------------------------------------------ formatting


def _attention_cost(attention: dict | None) -> str:
    """What the curve adds per cached key past its reference context, when the run measured it."""
    if not attention or not (attention.get("per_pass") or attention.get("per_token")):
        return ""
    return (f"; plus per cached key past {attention['reference']}: {attention['per_pass']:.3g} a pass and "
            f"{attention['per_token']:.3g} a new token")


def _decoding(sampling: dict | None) -> str:
    if not sampling or not sampling.get("temperature"):
        return "greedy decoding (temperature 0)"
    return (f"sampled decoding (temperature {sampling['temperature']}, seed {sampling['seed']}: every method samples "
            "the same tokens)")


def _f(v: float | None, digits: int = 2) -> str:
    return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"


def _vs_ngram(row: dict[str, Any]) -> str:
    """The median ratio, and with --repeat the range of the per-round ratios."""
    rounds = row.get("speedup_vs_ngram_rounds")
    cell = _x(row.get("speedup_vs_ngram"))
    return f"{cell} ({min(rounds):.2f}–{max(rounds):.2f})" if rounds else cell


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _yes(v: bool | None) -> str:
    return "–" if v is None else ("yes" if v else "**no**")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def markdown(result: dict[str, Any]) -> str:
    meta, summary = result["meta"], result["summary"]
    m, v = meta["machine"], meta["versions"]
    lines = [
        "# foretell benchmark",
        "",
        f"- **model**: {meta['model']} · **dtype**: {meta['dtype']} · **device**: {meta['device']}"
        + (" · tiny random model (smoke run: numbers mean nothing)" if meta.get("tiny") else ""),
        f"- **machine**: {m.get('cpu')}, {m.get('cores')} cores ({m.get('torch_threads')} torch threads), "
        f"{m.get('platform')}; load average at the end {_f(m.get('load_avg_at_end'))}",
        f"- **versions**: python {v.get('python')}, torch {v.get('torch')}, transformers {v.get('transformers')}, "
        f"foretell {v.get('foretell')}" + (f" (git {meta['git']['commit']}{' dirty' if meta['git']['dirty'] else ''})"
                                           if meta.get("git") else ""),
        f"- **cost curve** t(n)/t(1) ({meta.get('cost_curve_source')}): "
        + ", ".join(f"{n}: {r}" for n, r in (meta.get("cost_curve") or {}).items())
        + _attention_cost(meta.get("attention_cost"))
        + f"; CPU has native bf16: {meta.get('native_bf16')}",
        f"- **k policy**: {meta['k_policy']}; prefix cache off; {_decoding(meta.get('sampling'))}; "
        + ("" if meta.get("exact") is None else f"exact mode {'on' if meta['exact'] else 'off'}; ")
        + f"HF prompt lookup k = {meta['hf_prompt_lookup_num_tokens']}; simulated alignment k = {meta['alignment_k']}",
        f"- **run**: {meta['started']}, {meta['duration_s']:.0f} s; `foretell bench {' '.join(meta['argv'])}`",
        "",
        "Speedup = plain wall time / wall time on the same prompt in the same process (prefill included); "
        "vs n-gram = wall time of the same server without the prediction (n-gram lookup on) / with it (with "
        "--repeat: the median runs, and in brackets the range of the ratio over the rounds); "
        "decode speedup = decode tok/s ratio (tokens after the first output / time after it). Accept = "
        "accepted / (accepted + rejected) prediction tokens in the engine's OpenAI-style usage (rejected = "
        "prediction tokens absent from the output, so this is the share of the prediction used); draft acc = "
        "accepted / proposed draft tokens of all proposers (the verification work that paid off). Alignment "
        "efficiency = simulated oracle passes / our aligner's passes on (prediction, the output actually "
        "produced), k = 64; first-div. and line = the OpenAI-like and Cascade-like baselines on the same "
        "pair. Copy bound vs n-gram = n-gram lookup's wall time / the least wall time of any drafter that "
        "copies from the prediction, the prompt or the output so far, knowing the output (its cheapest "
        "decode on the run's cost curve at plain decoding's time per token, plus the time to first token): "
        "any = every copyable run, runs ≥ 4 = only runs of at least 4 tokens; what a prediction could add "
        "over n-gram lookup on this machine at most. Replay vs n-gram = the draft policy replayed on the "
        "output (no model: one request alone, on the run's cost curve), n-gram lookup's replayed cost over: "
        "the prediction's policy / the same policy drafting exactly as far as its chosen draft matches (best "
        "k) / drafting from whichever source's draft matches furthest (best source): the gaps are what the k "
        "policy and the choice of source lose. Identical = same token ids as plain decoding (in bf16 "
        "a batched verify pass may round differently from a one-token pass, so a mismatch there is reported, "
        "not hidden).",
        "",
    ]
    if summary.get("targets"):
        lines += ["## Targets", ""]
        lines += _table(["target", "measured", "met", "detail"],
                        [[t["target"], _f(t["measured"]), _yes(t["met"]), t["detail"]] for t in summary["targets"]])
        short = [t for t in summary["targets"] if t["met"] is False]
        lines += [""]
        if short:
            lines += ["**Where we fall short:**", ""]
            lines += [f"- {t['target']}: measured {_f(t['measured'])}, target {t['threshold']}." for t in short]
        elif not meta.get("tiny"):
            lines += ["All measured targets are met in this run."]
        lines += [""]

    main = [r for r in result["tasks"] if r["suite"] != "controls"]
    if main:
        lines += ["## Tasks", ""]
        header = ["task", "out tok", "plain tok/s e2e", "foretell tok/s e2e", "speedup", "decode ×",
                  "vs n-gram", "copy bound vs n-gram (any / runs ≥ 4)",
                  "replay vs n-gram (policy / best k / best source)", "passes ours/n-gram",
                  "oracle eff (real passes)", "TTFT plain/ours s",
                  "accept", "draft acc", "passes plain→ours", "align eff", "1st-div eff", "line eff", "HF PLD ×",
                  "ours / HF PLD", "identical"]
        rows = []
        for r in main:
            p, o, a = r["runs"]["plain"], r["runs"]["foretell"], r.get("alignment") or {}
            vs = r.get("passes_vs_ngram")
            rows.append([r["name"], str(r["output_tokens"]), _f(p["tok_s"], 1), _f(o["tok_s"], 1), _x(r["speedup"]),
                         _x(r["decode_speedup"]), _vs_ngram(r), _bounds(r), _policy_cell(r),
                         f"{vs[0]}/{vs[1]}" if vs else "–",
                         _f((r.get("copy_oracle") or {}).get("efficiency")),
                         f"{_f(p['ttft_s'])}/{_f(o['ttft_s'])}", _f(r["acceptance_rate"]),
                         _f(r.get("draft_acceptance")),
                         f"{p['forward_passes']}→{o['forward_passes']}", _f(a.get("efficiency")),
                         _f(a.get("first_divergence_efficiency")), _f(a.get("line_based_efficiency")),
                         _x(r.get("hf_prompt_lookup_speedup")), _x(r.get("vs_hf_prompt_lookup")),
                         _identity_cell(o)])
        lines += _table(header, rows) + [""]
        suite_rows = []
        for suite in ("verbatim", "edit", "corpus", "realedit", "longfile"):
            s = summary.get(suite)
            if not s:
                continue
            al = s.get("alignment") or {}
            suite_rows.append([suite, str(s["tasks"]), _x(s["speedup_geomean"]), _x(s["decode_speedup_geomean"]),
                               f"{_x(s.get('vs_ngram_geomean'))} (min {_x(s.get('vs_ngram_min'))})",
                               _bounds(s, per_task=False), _policy_cell(s, per_task=False),
                               _f(s.get("copy_oracle_efficiency_mean")),
                               _f(s["acceptance_rate_mean"]), _f(s.get("draft_acceptance_mean")),
                               _f(al.get("efficiency")),
                               _f(al.get("first_divergence_efficiency")), _f(al.get("line_based_efficiency")),
                               _x(s["hf_prompt_lookup_speedup_geomean"]), _x(s["vs_hf_prompt_lookup_geomean"]),
                               f"{s['identical']}/{s['tasks']}"])
        if suite_rows:
            lines += ["Per suite (geometric means; alignment pooled):", ""]
            lines += _table(["suite", "tasks", "speedup", "decode ×", "vs n-gram (geomean, min)",
                             "copy bound vs n-gram (any / runs ≥ 4)",
                             "replay vs n-gram (policy / best k / best source)", "oracle eff (real passes, mean)", "accept",
                             "draft acc", "align eff",
                             "1st-div eff", "line eff",
                             "HF PLD ×", "ours / HF PLD", "identical"], suite_rows) + [""]

    controls = [r for r in result["tasks"] if r["suite"] == "controls"]
    if controls:
        lines += ["## Controls", "",
                  "No prediction = n-gram lookup over the prompt only; garbage = unrelated prose of the same token "
                  "length; empty = an empty prediction (treated as none); first half = the file's first half, then "
                  "garbage; file = the file as the prediction, the prompt holding it without a code fence; prose reply "
                  "= the file as the prediction of an answer in prose about it (a question, not an edit). vs n-gram = "
                  "wall time without the prediction (n-gram on) / with it.", ""]
        lines += _table(["task", "out tok", "plain tok/s", "tok/s", "speedup", "vs n-gram", "accept", "draft acc",
                         "passes plain→ours",
                         "identical"],
                        [[r["name"], str(r["output_tokens"]), _f(r["runs"]["plain"]["tok_s"], 1),
                          _f(r["runs"]["foretell"]["tok_s"], 1), _x(r["speedup"]), _vs_ngram(r),
                          _f(r["acceptance_rate"]),
                          _f(r.get("draft_acceptance")),
                          f"{r['runs']['plain']['forward_passes']}→{r['runs']['foretell']['forward_passes']}",
                          _identity_cell(r["runs"]["foretell"])] for r in controls]) + [""]

    peers = [r for r in result["tasks"] if "hf_plain" in r["runs"]]
    if peers:
        lines += ["## Peers (same model object, same prompt ids)", "",
                  "HF = transformers `model.generate`, greedy, batch 1; prompt lookup with "
                  f"`prompt_lookup_num_tokens={meta['hf_prompt_lookup_num_tokens']}` (the original file is in "
                  "the prompt, as an HF user would rely on).", ""]
        lines += _table(["task", "ours plain tok/s", "HF plain tok/s", "HF PLD tok/s", "foretell tok/s",
                         "HF PLD passes", "foretell passes", "HF plain = ours plain", "HF PLD = HF plain"],
                        [[r["name"], _f(r["runs"]["plain"]["tok_s"], 1), _f(r["runs"]["hf_plain"]["tok_s"], 1),
                          _f(r["runs"]["hf_prompt_lookup"]["tok_s"], 1), _f(r["runs"]["foretell"]["tok_s"], 1),
                          str(r["runs"]["hf_prompt_lookup"]["forward_passes"]),
                          str(r["runs"]["foretell"]["forward_passes"]),
                          _identity_cell(r["runs"]["hf_plain"]),
                          _yes(r["runs"]["hf_prompt_lookup"].get("identical_vs_hf_plain"))] for r in peers]) + [""]
    if result.get("vllm"):
        lines += ["vLLM (separate server, n-gram k=10):", ""]
        lines += _table(["task", "variant", "out tok", "tok/s", "TTFT s"],
                        [[r["task"], r["variant"], str(r["output_tokens"]), _f(r["tok_s"], 1), _f(r["ttft_s"])]
                         for r in result["vllm"]]) + [""]

    if result.get("vllm_engine"):
        lines += _vllm_engine_section(result)

    if result.get("concurrency"):
        lines += ["## Concurrency", "",
                  "N simultaneous requests (the snake tasks cycled, each capped at the concurrency max_tokens), one "
                  "engine, continuous batching: plain decoding, n-gram lookup alone (no predictions) and with the "
                  "predictions (n-gram lookup and the predictions swap order at every other level). vs plain / vs "
                  "n-gram = aggregate tok/s over that of plain decoding / of n-gram lookup alone.", ""]
        lines += _table(["N", "mode", "tokens", "wall s", "aggregate tok/s", "vs plain", "vs n-gram", "mean TTFT s",
                         "accept", "draft acc", "identical"],
                        [[str(r["n"]), r["mode"], str(r["total_tokens"]), _f(r["wall_s"]), _f(r["agg_tok_s"], 1),
                          _x(r.get("speedup_vs_plain")), _x(r.get("speedup_vs_ngram")), _f(r["mean_ttft_s"]),
                          _f(r["acceptance_rate"]),
                          _f(r.get("draft_acceptance")),
                          f"{r['identical_requests']}/{r['n']}" if "identical_requests" in r else ""]
                         for r in result["concurrency"]]) + [""]

    if result.get("profile"):
        lines += ["## Step profile", "",
                  "Mean ms per engine step. forward = model pass; verify = acceptance + sampling; propose = "
                  "drafting and the proposers' bookkeeping (observe); other = scheduling, detokenisation, outputs.",
                  ""]
        lines += _table(["label", "steps", "step ms", "forward", "verify", "propose", "other"],
                        [[label, str(p["steps"]), _f(p["step_ms"]),
                          *(f"{_f(p[f'{ph}_ms'])} ({100 * p[f'{ph}_share']:.0f}%)"
                            for ph in ("forward", "verify", "propose", "other"))]
                         for label, p in result["profile"].items()]) + [""]

    plots = [p for p in PLOTS if p in result.get("plots", [])]
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    if result.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in result["notes"]] + [""]
    return "\n".join(lines)


def _spec_k(k: int | None, fk: int | None) -> str:
    """The two speculative servers' num_speculative_tokens, as a run's meta has them (older runs: one for both)."""
    if fk is None or fk == k:
        return f"{k if k else '?'} for both"
    return f"{k} for vLLM's ngram, {fk} for foretell's plugin (the longest draft; its policy picks each draft's length)"


def _vllm_engine_section(result: dict[str, Any]) -> list[str]:
    """``--engine vllm``: vLLM plain / n-gram / foretell plugin, same tasks and model, this run."""
    ve, meta = result["vllm_engine"], result["meta"]
    embedded = {r["name"]: r for r in result.get("tasks", [])}
    k, fk = meta.get("vllm_k"), meta.get("vllm_foretell_k")
    lines = ["## vLLM engine", "",
             f"vLLM servers (on the run's device: {meta.get('device', '?')}) started in turn with the same model and "
             f"dtype ({meta.get('vllm_dtype', meta['dtype'])}), prefix caching off, in this order: vLLM's `ngram` "
             "(prompt lookup, the file is in the prompt), foretell's plugin (`custom_class` proposer + middleware, "
             "the request carries the prediction) and plain (no speculation); num_speculative_tokens: "
             f"{_spec_k(k, fk)}. Each server first answers untimed warm-up requests on the first task's prompt and "
             "the concurrent batch's (16 tokens each, with their predictions), so that its first verify passes fall "
             "outside the clock. Ratios are wall times within this run. The embedded engine's foretell tok/s on the "
             "same task is beside it.", ""]
    lines += _table(["task", "out tok", "vLLM plain tok/s", "vLLM ngram tok/s", "vLLM+foretell tok/s",
                     "foretell/ngram", "foretell/plain", "ngram/plain", "accept", "identical ngram / foretell",
                     "embedded foretell tok/s"],
                    [[r["name"], str(r["output_tokens"]), _f(r["runs"]["plain"]["tok_s"], 1),
                      _f(r["runs"]["ngram"]["tok_s"], 1), _f(r["runs"]["foretell"]["tok_s"], 1),
                      _x(r["foretell_vs_ngram"]), _x(r["runs"]["foretell"]["speedup_vs_vllm_plain"]),
                      _x(r["runs"]["ngram"]["speedup_vs_vllm_plain"]), _f(r["runs"]["foretell"]["acceptance_rate"]),
                      f"{_yes(r['runs']['ngram']['identical_vs_vllm_plain'])} / "
                      f"{_yes(r['runs']['foretell']['identical_vs_vllm_plain'])}",
                      _f(((embedded.get(r["name"]) or {}).get("runs") or {}).get("foretell", {}).get("tok_s"), 1)]
                     for r in ve["tasks"]]) + [""]
    if ve.get("concurrency"):
        lines += _table(["N", "vLLM variant", "tokens", "wall s", "aggregate tok/s", "vs plain", "vs ngram",
                         "draft acc", "identical"],
                        [[str(c["n"]), c["mode"], str(c["total_tokens"]), _f(c["wall_s"]), _f(c["agg_tok_s"], 1),
                          _x(c["speedup_vs_vllm_plain"]), _x(c["speedup_vs_vllm_ngram"]), _f(c["draft_acceptance"]),
                          f"{c['identical_requests']}/{c['n']}"] for c in ve["concurrency"]]) + [""]
    summary = ve["summary"]
    lines += [f"- {t['target']}: {_x(t['measured'])} "
              f"({'met' if t['met'] else 'SHORT' if t['met'] is False else 'n/a'})" for t in summary["targets"]]
    lines += [f"- edit geomean vLLM+foretell / vLLM plain: {_x(summary['edit_geomean_foretell_vs_plain'])}", ""]
    return lines


def _identity_cell(run: dict) -> str:
    if run.get("identical_vs_plain"):
        return "yes"
    return f"**no** (first {run.get('common_prefix_vs_plain')} tok equal)"


# ------------------------------------------------------------------------------------------ plots


def plot_all(result: dict[str, Any], out: Path) -> list[str]:
    """Write the PNGs that have data; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for name, fn in (("speedup_vs_acceptance.png", _plot_speedup), ("snake_tokens_over_time.png", _plot_timeline),
                     ("concurrency.png", _plot_concurrency)):
        fig = fn(plt, result)
        if fig is not None:
            fig.savefig(out / name, dpi=110, bbox_inches="tight")
            plt.close(fig)
            written.append(name)
    return written


def _plot_speedup(plt, result):
    rows = [r for r in result["tasks"] if r.get("acceptance_rate") is not None and r.get("speedup")]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = {"verbatim": "tab:red", "edit": "tab:blue", "corpus": "tab:green", "controls": "tab:gray"}
    for suite in dict.fromkeys(r["suite"] for r in rows):
        sel = [r for r in rows if r["suite"] == suite]
        ax.scatter([r["acceptance_rate"] for r in sel], [r["speedup"] for r in sel], label=suite,
                   color=colors.get(suite), alpha=0.8)
        if suite in ("verbatim", "edit"):
            for r in sel:
                ax.annotate(r["name"].split("/")[-1], (r["acceptance_rate"], r["speedup"]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_yscale("log")
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("acceptance rate: accepted / (accepted + rejected) prediction tokens")
    ax.set_ylabel("speedup vs plain decoding (wall, log)")
    ax.set_title(f"foretell: speedup vs acceptance — {result['meta']['model']} {result['meta']['dtype']}")
    ax.legend()
    ax.grid(alpha=0.3)
    return fig


def _plot_timeline(plt, result):
    panels = [r for r in result["tasks"] if r["suite"] in ("verbatim", "edit")
              and any(run.get("timeline") for run in r["runs"].values())]
    if not panels:
        return None
    panels = panels[:2]  # verbatim and the first edit
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    style = {"plain": ("plain decoding", "black"), "foretell": ("foretell (prediction)", "tab:red"),
             "hf_plain": ("HF generate", "tab:gray"), "hf_prompt_lookup": ("HF prompt lookup", "tab:blue")}
    for ax, row in zip(axes[0], panels):
        for variant, run in row["runs"].items():
            events = run.get("timeline") or []
            if not events:
                continue
            label, color = style.get(variant, (variant, None))
            ts = [0.0] + [e[0] for e in events]
            ns = [0] + [e[1] for e in events]
            ax.step(ts, ns, where="post", label=f"{label}: {run['wall_s']:.1f} s", color=color)
        ax.set_xlabel("seconds since the request")
        ax.set_ylabel("output tokens")
        ax.set_title(row["name"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


def _plot_concurrency(plt, result):
    rows = result.get("concurrency") or []
    if not rows:
        return None
    ns = sorted({r["n"] for r in rows})
    fig, ax = plt.subplots(figsize=(6, 4))
    modes = [m for m in ("plain", "ngram", "prediction") if any(r["mode"] == m for r in rows)]
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        vals = [next((r["agg_tok_s"] for r in rows if r["n"] == n and r["mode"] == mode), 0.0) for n in ns]
        ax.bar([j + (i - (len(modes) - 1) / 2) * width for j in range(len(ns))], vals, width, label=mode)
    ax.set_xticks(range(len(ns)), [str(n) for n in ns])
    ax.set_xlabel("simultaneous requests")
    ax.set_ylabel("aggregate output tok/s")
    ax.set_title("concurrency: plain decoding, n-gram lookup, predictions")
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    return fig


# ------------------------------------------------------------------------------------------ write


def write_all(result: dict[str, Any], out: str | Path) -> dict[str, Path]:
    """Summarise, plot, and write results.json + results.md into ``out``; returns the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result["summary"] = summarize(result)
    result["plots"] = plot_all(result, out)
    paths = {"json": out / "results.json", "markdown": out / "results.md"}
    paths["json"].write_text(json.dumps(result, indent=1, default=_json_default) + "\n")
    paths["markdown"].write_text(markdown(result) + "\n")
    paths.update({p: out / p for p in result["plots"]})
    return paths


def _json_default(obj):
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)
