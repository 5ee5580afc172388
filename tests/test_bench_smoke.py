"""`foretell bench --tiny`: the benchmark runs end to end on the tiny random model and writes its outputs.

No timing is asserted anywhere: only that the files exist with the expected keys and that, in fp32, every
foretell output is token-for-token identical to plain decoding.
"""

from __future__ import annotations

import json

import pytest

from foretell.bench.cli import main
from foretell.bench.report import PLOTS
from foretell.bench.workloads import SUITES, WorkloadOptions, build_tasks, corpus_instruction, snake_source

RUN_KEYS = {"wall_s", "ttft_s", "decode_s", "tok_s", "decode_tok_s", "output_tokens", "forward_passes",
            "acceptance_rate", "speedup_vs_plain", "identical_vs_plain"}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    argv = ["--tiny", "--out", str(out), "--limit", "1", "--max-tokens", "6", "--concurrency", "1,2",
            "--profile", "--record", "--no-progress"]
    assert main(argv) == 0
    return out, json.loads((out / "results.json").read_text())


def test_outputs_written(bench):
    out, result = bench
    assert set(result) >= {"meta", "tasks", "concurrency", "profile", "summary", "notes", "plots"}
    assert (out / "results.md").read_text().startswith("# foretell benchmark")
    assert "replay vs n-gram (policy / best k / best source)" in (out / "results.md").read_text()
    for name in PLOTS:
        assert name in result["plots"]
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    recorded = json.loads((out / "recorded_outputs.json").read_text())
    assert recorded["model"] == "tiny-random-qwen2" and recorded["dtype"] == "float32"
    assert recorded["tasks"] and all(t["output_ids"] for t in recorded["tasks"])


def test_meta_states_the_setup(bench):
    meta = bench[1]["meta"]
    assert meta["dtype"] == "float32" and meta["tiny"] is True
    assert {"cpu", "cores"} <= set(meta["machine"])
    assert {"torch", "transformers", "python"} <= set(meta["versions"])
    assert "k_max" in meta["k_policy"]


def test_every_suite_ran(bench):
    result = bench[1]
    suites = {t["suite"] for t in result["tasks"]}
    assert suites == {"verbatim", "edit", "corpus", "realedit", "controls"}
    for task in result["tasks"]:
        assert RUN_KEYS <= set(task["runs"]["plain"]) and RUN_KEYS <= set(task["runs"]["foretell"])
        if task["suite"] != "controls":
            assert {"hf_plain", "hf_prompt_lookup", "ngram"} <= set(task["runs"])
            assert task["alignment"]["oracle_passes"] >= 1
            assert task["runs"]["ngram"]["identical_vs_plain"] and task["speedup_vs_ngram"] > 0
            oracle = task["copy_oracle"]
            assert 1 <= oracle["oracle_passes"] and oracle["efficiency"] == oracle["oracle_passes"] / oracle["decode_passes"]
            bound = task["copy_bound"]  # the least a drafter knowing the output could take (see copy_bound)
            assert bound["any"]["cost"] <= bound["runs4"]["cost"] <= task["output_tokens"] - 1
            assert bound["any"]["vs_ngram"] >= bound["runs4"]["vs_ngram"] > 0
            if task["prediction_tokens"]:  # the policy replayed on the output, and knowing it (policy_bounds)
                replay = task["policy_bounds"]
                assert set(replay) == {"ngram", "policy", "k", "source"}
                assert all(replay[label]["vs_ngram"] > 0 and replay[label]["passes"] >= 1
                           for label in ("policy", "k", "source"))
    kinds = {t["kind"] for t in result["tasks"] if t["suite"] == "controls"}
    assert kinds == {"no_prediction", "garbage", "empty", "first_half"}
    expected = {(n, mode) for n in (1, 2) for mode in ("plain", "ngram", "prediction")}
    assert {(c["n"], c["mode"]) for c in result["concurrency"]} == expected
    assert {"plain", "foretell"} <= set(result["profile"])
    assert {t["target"] for t in result["summary"]["targets"]}  # targets are evaluated (met or not)
    real = next(t for t in result["summary"]["targets"] if t["target"].startswith("real edits"))
    assert real["threshold"] == 1.5 and "copy bound" in real["detail"]


def test_identical_to_plain_in_fp32(bench):
    result = bench[1]
    for task in result["tasks"]:
        assert task["identical"], task["name"]
        assert task["runs"]["hf_plain"]["identical_vs_plain"] if "hf_plain" in task["runs"] else True
    self_pred = next(t for t in result["tasks"] if t["name"] == "tiny/self-prediction")
    assert self_pred["runs"]["foretell"]["accepted_prediction"] > 0  # the acceptance path really ran
    perfect = next(t for t in result["tasks"] if t["name"] == "snake/perfect")
    run = perfect["runs"]["foretell"]
    assert run["accepted_prediction"] + run["rejected_prediction"] == perfect["output_tokens"]  # its own output
    # every token but each pass's own (the target's token after the accepted draft) came from the prediction
    assert run["rejected_prediction"] <= run["forward_passes"] < perfect["output_tokens"] / 2
    ceiling = result["summary"]["ceiling"]  # decode speedup against what the cost curve allows
    assert ceiling["ceiling"] > 1 and ceiling["k"] >= 1
    if perfect["decode_speedup"]:
        assert ceiling["share"] == perfect["decode_speedup"] / ceiling["ceiling"]
    else:  # the tiny output came whole with the first token: nothing after it to time
        assert ceiling["share"] is None and run["forward_passes"] - run["prefill_passes"] <= 2
    for row in result["concurrency"]:
        if row["mode"] != "plain":
            assert row["identical_requests"] == row["n"]
        if row["mode"] == "prediction":
            ngram = next(r for r in result["concurrency"] if r["n"] == row["n"] and r["mode"] == "ngram")
            assert row["speedup_vs_ngram"] == row["agg_tok_s"] / ngram["agg_tok_s"]


def test_workloads_for_the_real_tokenizer_shape():
    from foretell.testing import make_tiny_tokenizer

    tasks, notes = build_tasks(make_tiny_tokenizer(), SUITES, WorkloadOptions())
    by_suite = {}
    for t in tasks:
        by_suite.setdefault(t.suite, []).append(t)
    assert len(by_suite["edit"]) == 5 and [t.kind for t in by_suite["verbatim"]] == ["verbatim", "perfect"]
    assert len(by_suite["corpus"]) >= 30, notes
    assert {t.kind for t in by_suite["controls"]} == {"no_prediction", "garbage", "empty", "first_half", "file",
                                                     "prose_reply"}
    prose = next(t for t in by_suite["controls"] if t.kind == "prose_reply")
    assert prose.prediction_ids == by_suite["verbatim"][0].prediction_ids
    assert "```" in make_tiny_tokenizer().decode(prose.prompt_ids)  # the file fenced in the question
    assert prose.max_tokens == 256 and prose.meta["prompt"] == "snake-explain"
    unfenced = next(t for t in by_suite["controls"] if t.kind == "file")
    assert unfenced.prediction_ids == by_suite["verbatim"][0].prediction_ids
    assert unfenced.meta["prompt"] == "snake-unfenced" and "```" not in make_tiny_tokenizer().decode(unfenced.prompt_ids)
    half = next(t for t in by_suite["controls"] if t.kind == "first_half")
    size = len(by_suite["verbatim"][0].prediction_ids)
    assert half.prediction_ids[: size // 2] == by_suite["verbatim"][0].prediction_ids[: size // 2]
    assert half.prediction_ids[size // 2:] != by_suite["verbatim"][0].prediction_ids[size // 2:]
    garbage = next(t for t in by_suite["controls"] if t.kind == "garbage" and t.meta["prompt"] == "snake-verbatim")
    assert len(garbage.prediction_ids) == len(by_suite["verbatim"][0].prediction_ids)
    assert all(t.prediction_ids == by_suite["verbatim"][0].prediction_ids for t in by_suite["edit"])
    assert corpus_instruction("move_function_2_m8", "move_function").startswith("Swap")
    assert "def main" in snake_source()
    longfile = by_suite["longfile"]
    assert [t.kind for t in longfile] == ["rename", "type_hints", "one_default"]
    for t in longfile:  # the whole ~350-line file in the prompt, as the prediction, and room to write it back
        assert len(t.prediction_ids) > 2000 and t.max_tokens > len(t.prediction_ids)
        assert "class shlex" in t.prediction_text and t.meta["file"] == "shlex.py"
        assert len(t.prompt_ids) > len(t.prediction_ids)


def test_the_long_file_suite_runs_on_request_only(tmp_path):
    """`--suite longfile` runs the long-file edits (tiny: the file cut short); the default run leaves them out
    (test_every_suite_ran)."""
    argv = ["--tiny", "--suite", "longfile", "--limit", "1", "--max-tokens", "4", "--out", str(tmp_path),
            "--no-progress"]
    assert main(argv) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    assert [t["name"] for t in result["tasks"]] == ["longfile/rename"]
    assert "longfile" in (tmp_path / "results.md").read_text()


def test_replay_of_the_recording(bench, capsys):
    out, _ = bench
    assert main(["--replay", str(out / "recorded_outputs.json"), "--out", str(out)]) == 0
    replayed = json.loads((out / "replay.json").read_text())
    assert replayed["model"] == "tiny-random-qwen2"
    assert all(t["alignment"]["oracle_passes"] >= 1 for t in replayed["tasks"])
    assert "Pooled per suite" in capsys.readouterr().out


def test_repeat_reports_the_median_run_and_every_round(tmp_path):
    """--repeat 3: each variant runs three times; the reported run is the median one and the per-round
    ratios against n-gram lookup are kept beside it."""
    from foretell.bench.harness import RunResult, median_run

    runs = [RunResult("foretell", [1], wall, 0.1, 0.1, 1, 1) for wall in (3.0, 1.0, 2.0)]
    assert median_run(runs).wall_s == 2.0 and median_run(runs).repeats == [3.0, 1.0, 2.0]
    assert median_run(runs[:1]).repeats is None
    out = tmp_path / "bench"
    assert main(["--tiny", "--suite", "realedit", "--limit", "1", "--repeat", "3", "--out", str(out),
                 "--no-progress"]) == 0
    result = json.loads((out / "results.json").read_text())
    (task,) = result["tasks"]
    assert len(task["runs"]["foretell"]["repeats"]) == 3 and len(task["runs"]["ngram"]["repeats"]) == 3
    assert len(task["speedup_vs_ngram_rounds"]) == 3
    assert task["runs"]["foretell"]["wall_s"] == sorted(task["runs"]["foretell"]["repeats"])[1]
    row = next(line for line in (out / "results.md").read_text().splitlines() if line.startswith("| realedit/"))
    low, high = min(task["speedup_vs_ngram_rounds"]), max(task["speedup_vs_ngram_rounds"])
    assert f"({low:.2f}–{high:.2f})" in row  # the range over the rounds is shown


def test_tasks_option_runs_only_the_named_tasks(tmp_path):
    """--tasks picks tasks by name, by name after the suite, or by glob; a name that matches nothing stops
    the run with a message naming the tasks there are."""
    out = tmp_path / "bench"
    assert main(["--tiny", "--suite", "realedit,controls", "--tasks", "json_edit,controls/open:*", "--max-tokens",
                 "4", "--out", str(out), "--no-progress"]) == 0
    names = [t["name"] for t in json.loads((out / "results.json").read_text())["tasks"]]
    assert names[0] == "realedit/json_edit" and len(names) == 4
    assert all(n.startswith("controls/open:") for n in names[1:])
    with pytest.raises(SystemExit, match="no_such_task matched no task.*realedit/type_hints"):
        main(["--tiny", "--suite", "realedit", "--tasks", "no_such_task", "--out", str(tmp_path / "x"),
              "--no-progress"])


def test_sampled_bench_compares_methods_on_one_sampled_output(tmp_path, bench):
    """--temperature 1 --seed 3: every method samples the same tokens (the engine draws position t's random
    number from (seed, t)), so the identity check still holds; the output is not the greedy one; the HF peers,
    whose sampled tokens would differ, are skipped and the report says how it decoded."""
    out = tmp_path / "sampled"
    argv = ["--tiny", "--suite", "realedit,controls", "--limit", "1", "--max-tokens", "24", "--temperature", "1.0",
            "--seed", "3", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    result = json.loads((out / "results.json").read_text())
    assert result["meta"]["sampling"] == {"temperature": 1.0, "seed": 3}
    assert "sampled decoding (temperature 1.0, seed 3" in (out / "results.md").read_text()
    greedy = {t["name"]: t["runs"]["plain"]["text"] for t in bench[1]["tasks"]}
    differs = 0
    for task in result["tasks"]:
        runs = task["runs"]
        assert "hf_plain" not in runs and "hf_prompt_lookup" not in runs
        assert all(run["identical_vs_plain"] for run in runs.values()), task["name"]
        first = greedy[task["name"]]  # greedy, 6 tokens
        differs += runs["plain"]["text"][: len(first)] != first
    assert differs, "sampling at temperature 1 gave the greedy outputs"
    with pytest.raises(SystemExit):
        main(["--tiny", "--temperature", "0.5", "--record", str(tmp_path / "r.json")])
    with pytest.raises(SystemExit):
        main(["--tiny", "--temperature", "3"])


def test_repeat_reverses_the_order_of_the_variants_every_other_round(tmp_path, monkeypatch):
    """--repeat 4 runs n-gram lookup and the prediction in the order A B, B A, A B, B A: neither always runs
    right after the other (or last), so a machine that slows down under sustained load biases neither."""
    from foretell.bench.harness import Bench

    order: list[str] = []
    real_run = Bench._engine_run

    def logged(self, task, spec, variant):
        if variant in ("ngram", "foretell"):
            order.append(variant)
        return real_run(self, task, spec, variant)

    monkeypatch.setattr(Bench, "_engine_run", logged)
    assert main(["--tiny", "--suite", "realedit", "--limit", "1", "--repeat", "4", "--out", str(tmp_path / "b"),
                 "--no-progress"]) == 0
    assert order == ["ngram", "foretell", "foretell", "ngram", "ngram", "foretell", "foretell", "ngram"]


def test_alignment_efficiency_uses_the_aligner_the_engine_runs():
    """The bench's simulated alignment gives the aligner the line-break tokens, as the engine does (found from
    the token texts): after an inserted line it guesses the prediction's next line, so fewer passes than the
    same aligner without them (18 there)."""
    import random

    from foretell.bench.harness import alignment
    from foretell.core.prediction import PredictionProposer
    from foretell.core.simulate import compare

    newline = 100
    text = lambda t: "\n" if t == newline else f"w{t}"  # noqa: E731
    rng = random.Random(0)
    lines = [[rng.randrange(1, 90) for _ in range(6)] for _ in range(12)]
    prediction = [t for line in lines for t in line + [newline]]
    output = []
    for i, line in enumerate(lines):
        if i in (3, 7):  # an inserted line
            output += [rng.randrange(1, 90) for _ in range(5)] + [newline]
        if i == 5:  # an edited line
            line = line[:2] + [91, 92] + line[4:]
        output += line + [newline]
    blind = compare(prediction, output, lambda: PredictionProposer(prediction), 64, text).ours.passes
    got = alignment(prediction, output, text)
    assert got["ours_passes"] < blind
