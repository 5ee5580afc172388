"""Alignment efficiency over the edit-pair corpus: our proposer vs an oracle and two baselines.

For each (prediction P, output O) pair: target passes needed by the oracle (the longest substring of P
matching O, every pass), by our PredictionProposer (the aligner alone, and with the n-gram fallback over
prompt + output, the prompt holding P as an edit request's prompt does), by stop-at-first-divergence
(OpenAI-like) and by line-based realignment (Cascade-like). Efficiency = oracle passes / passes; acceptance =
accepted / proposed draft tokens. ``eff>=2`` compares with an oracle that forgoes single-token matches: in new
text the real oracle picks single tokens out of P with hindsight, which no proposer can do.

    .venv/bin/python benchmarks/simulate_alignment.py                  # regex stand-in tokenizer, k = 64
    .venv/bin/python benchmarks/simulate_alignment.py --tokenizer qwen --adaptive --summary
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from foretell.bench.corpus import TokenizedPair, build_corpus, load_tokenizer, tokenize_corpus  # noqa: E402
from foretell.core.draft import Proposer  # noqa: E402
from foretell.core.ngram import NgramProposer  # noqa: E402
from foretell.core.prediction import PredictionProposer  # noqa: E402
from foretell.core.simulate import compare, efficiency, newline_ids, oracle, simulate  # noqa: E402

COLUMNS = ["P", "O", "oracle", "ours", "ours+ng", "first_div", "line", "eff", "eff+ng", "eff_fd", "eff_line",
           "acc", "acc+ng", "acc_line", "eff>=2"]


def adaptive_k(k_max: int):
    """A simple k policy: the proposer's suggested cap (its confidence), at most ``k_max``."""

    def policy(proposer: Proposer) -> int:
        cap = getattr(proposer, "suggested_cap", lambda: k_max)()
        return max(1, min(k_max, cap))

    return policy


def evaluate(pair: TokenizedPair, token_text, k: int, adaptive: bool) -> dict:
    pred, out = pair.prediction_ids, pair.output_ids
    newlines = newline_ids(pred + out, token_text)

    def ours(with_ngram: bool) -> PredictionProposer:
        fallback = NgramProposer(pred, weak_cap=8) if with_ngram else None
        return PredictionProposer(pred, fallback=fallback, newline_ids=newlines)

    cmp = compare(pred, out, lambda: ours(False), k, token_text)
    with_ngram = simulate(ours(True), out, k)
    row = {
        "name": pair.name, "kind": pair.kind, "P": len(pred), "O": len(out),
        "oracle": cmp.oracle.passes, "ours": cmp.ours.passes, "ours+ng": with_ngram.passes,
        "first_div": cmp.first_divergence.passes, "line": cmp.line_based.passes,
        "eff": cmp.efficiency, "eff+ng": efficiency(cmp.oracle, with_ngram),
        "eff_fd": cmp.first_divergence_efficiency, "eff_line": cmp.line_based_efficiency,
        "acc": cmp.ours.acceptance_rate, "acc+ng": with_ngram.acceptance_rate,
        "acc_line": cmp.line_based.acceptance_rate,
        "eff>=2": efficiency(oracle(pred, out, k, min_match=2), with_ngram),
    }
    if adaptive:
        result = simulate(ours(True), out, adaptive_k(k))
        row["eff_adapt"] = efficiency(cmp.oracle, result)
        row["acc_adapt"] = result.acceptance_rate
    return row


def print_table(rows: list[dict], tokenizer: str, k: int, adaptive: bool, verbose: bool) -> None:
    cols = COLUMNS + (["eff_adapt", "acc_adapt"] if adaptive else [])
    print(f"tokenizer: {tokenizer}; k = {k}; {len(rows)} pairs. eff = oracle passes / passes; acc = accepted / "
          "proposed draft tokens; +ng = with the n-gram fallback (prompt = P, plus the output); fd = stop at "
          "first divergence; line = line-based realign; eff>=2 = eff+ng against an oracle without 1-token "
          "matches" + ("; adapt = +ng with k = min(64, suggested_cap)" if adaptive else "") + "\n")
    print("| pair | kind | " + " | ".join(cols) + " |")
    print("|" + "---|" * (len(cols) + 2))
    for row in rows if verbose else []:
        print(f"| {row['name']} | {row['kind']} | " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    means = {c: statistics.mean(r[c] for r in rows) for c in cols}
    print("| **mean** | | " + " | ".join(_fmt(means[c]) for c in cols) + " |")
    print("\n| kind | pairs | eff | eff+ng | eff_fd | eff_line | acc+ng | eff>=2 |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in dict.fromkeys(r["kind"] for r in rows):
        sel = [r for r in rows if r["kind"] == kind]
        cells = [_fmt(statistics.mean(r[c] for r in sel)) for c in ("eff", "eff+ng", "eff_fd", "eff_line",
                                                                    "acc+ng", "eff>=2")]
        print(f"| {kind} | {len(sel)} | " + " | ".join(cells) + " |")


def _fmt(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", choices=["regex", "qwen"], default="regex",
                        help="qwen = the default model's tokenizer (converted on first use)")
    parser.add_argument("-k", type=int, default=64)
    parser.add_argument("--adaptive", action="store_true", help="also run an adaptive k policy")
    parser.add_argument("--summary", action="store_true", help="means only, no per-pair rows")
    args = parser.parse_args()
    tokenizer = load_tokenizer(args.tokenizer)
    pairs = tokenize_corpus(build_corpus(), tokenizer)
    rows = [evaluate(pair, tokenizer.token_text, args.k, args.adaptive) for pair in pairs]
    print_table(rows, tokenizer.name, args.k, args.adaptive, not args.summary)


if __name__ == "__main__":
    main()
