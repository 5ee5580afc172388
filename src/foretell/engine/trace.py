"""The per-step trace (opt-in): for every request and step, which source drafted, how many tokens and why,
what the target accepted, and where the prediction aligner stands. One JSON object per line.

    foretell serve --trace steps.jsonl     # or EngineConfig(trace_path=...), or engine.trace = list.append

A record (fields absent when they do not apply)::

    {"step": 812, "t": 41.27, "request": "c7a…", "pos": 233, "batch_tokens": 0,
     "source": "prediction", "context": "prediction/aligned", "k": 48, "expected": 31.5, "cost": 1.52, "rate": 20.1,
     "branch": {"source": "ngram", "context": "ngram/2", "k": 6},
     "options": [{"context": "prediction/aligned", "k": 48, "limit": 611, "alpha": 0.97, "score": 19.7}, …],
     "winner": "prediction", "accepted": 48, "emitted": 49,
     "aligner": {"aligned": true, "position": 702, "context": "prediction/aligned"}}

``expected`` is the policy's expected tokens for this request from the pass, ``cost`` the pass's cost in
one-token passes (the measured curve), ``rate`` the tokens per one-token-pass time a draft had to beat, and
``score`` each option's expected extra tokens less its extra pass time paid at that rate
(:func:`foretell.core.adaptive_k.net_gain`).
:func:`summarize` turns a trace into per-source totals (the bench prints them).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterable

from foretell.core.policy import Decision

Tracer = Callable[[dict], None]


def file_tracer(path: str | Path) -> Tracer:
    """A tracer appending JSON lines to ``path`` (line-buffered: a crash loses at most the current line)."""
    fh = open(path, "a", buffering=1, encoding="utf-8")
    return lambda record: fh.write(json.dumps(record, separators=(",", ":")) + "\n")


def step_record(step: int, start: float, request_id: str, pos: int, batch_tokens: int, decision: Decision,
                winner: str, accepted: int, emitted: int, proposer) -> dict:
    """One request's record for one step (see the module docstring)."""
    record = {"step": step, "t": round(time.perf_counter() - start, 4), "request": request_id, "pos": pos,
              "batch_tokens": batch_tokens, "source": decision.source, "k": len(decision.draft),
              "expected": round(decision.expected, 3), "cost": round(decision.cost, 3),
              "rate": round(decision.rate, 3),
              "winner": winner, "accepted": accepted, "emitted": emitted}
    if decision.chosen is not None:
        record["context"] = decision.chosen.context
    if decision.branch is not None and decision.branch_option is not None:
        record["branch"] = {"source": decision.branch.source, "context": decision.branch_option.context,
                            "k": len(decision.branch)}
    if decision.options:
        record["options"] = [{"context": o.context, "k": o.k, "limit": o.limit, "alpha": round(o.alpha, 4),
                              "score": round(o.score, 3)} for o in decision.options]
    aligner = getattr(proposer, "aligner", None)
    if aligner is not None:
        record["aligner"] = {"aligned": aligner.aligned, "position": aligner.position, "context": aligner.context()}
    return record


def summarize(records: Iterable[dict]) -> dict:
    """Per request: steps, and per drafting context the steps, drafted and accepted tokens, and tree steps."""
    out: dict[str, dict] = {}
    for r in records:
        req = out.setdefault(r["request"], {"steps": 0, "trees": 0, "contexts": defaultdict(lambda: [0, 0, 0])})
        req["steps"] += 1
        req["trees"] += "branch" in r
        counts = req["contexts"][r.get("context", "none") if r["k"] else "none"]
        counts[0] += 1
        counts[1] += r["k"]
        counts[2] += r["accepted"]
    for req in out.values():
        req["contexts"] = {c: {"steps": v[0], "drafted": v[1], "accepted": v[2]} for c, v in req["contexts"].items()}
    return out
