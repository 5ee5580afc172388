"""A third set of held-out-like tasks (2026-12-02), written before any was run: files copied into files/ (C, SQL,
TOML, CommonJS, Python, Makefile, shell), and request shapes the two earlier sets did not use: a system message, a
second user turn after an assistant reply, a prediction sent as a list of text parts, a bare "code only" request.
tasks: name -> (messages, prediction or None); PROSE: the tasks whose reply is not the file again."""
import os
HERE = os.path.dirname(os.path.abspath(__file__))
def rd(name): return open(os.path.join(HERE, "files", name)).read()
C, SQL, TOML, JS, SCHED, MK, SH = (rd(n) for n in ("extension.c", "citext.sql", "pyproject.toml", "get-workspaces.js",
                                                    "sched.py", "Makefile", "coverage-diff.sh"))
def fenced(lang, text): return f"```{lang}\n{text}```"
def parts(text):  # the prediction as two text parts, split at a line boundary near the middle
    cut = text.index("\n", len(text) // 2) + 1
    return [{"type": "text", "text": text[:cut]}, {"type": "text", "text": text[cut:]}]
tasks = {
 "c_overflow": ([{"role": "system", "content": "You are a careful C programmer. When you change a file, reply with the whole file."},
                 {"role": "user", "content": "In _testcext_add, raise OverflowError and return NULL when i + j overflows a long "
                  "(use __builtin_add_overflow).\n\n" + fenced("c", C)}], C),
 "sql_rename": ([{"role": "user", "content": "Rename every function named citext_pattern_* to citext_pat_* (keep the rest). "
                  "Return the full SQL script.\n\n" + fenced("sql", SQL)}], SQL),
 "toml_py314": ([{"role": "user", "content": "Add a classifier for Python 3.14, drop the ones for 3.6, 3.7 and 3.8, and set "
                  "requires-python to \">=3.9\". Reply with the whole pyproject.toml.\n\n" + fenced("toml", TOML)}], TOML),
 "js_esm": ([{"role": "user", "content": "Convert this CommonJS module to an ES module (import/export). Return the full "
              "file.\n\n" + fenced("javascript", JS)}], JS),
 "sched_turn2": ([{"role": "user", "content": "What is this module for?\n\n" + fenced("python", SCHED)},
                  {"role": "assistant", "content": "It implements a general-purpose event scheduler: `scheduler` keeps a "
                   "priority queue of timed events and runs them with pluggable time and delay functions."},
                  {"role": "user", "content": "Rename the class scheduler to Scheduler (keep a `scheduler = Scheduler` alias "
                   "at the end) and give me the whole updated module."}], SCHED),
 "mk_parts": ([{"role": "user", "content": "Add a `test` target that runs `go vet ./...` and `go test ./...`, and declare "
               "all, clean, tar and test as .PHONY. Output the complete Makefile.\n\n" + fenced("makefile", MK)}], parts(MK)),
 "sh_codeonly": ([{"role": "system", "content": "Respond only with code, with no markdown formatting and no explanation."},
                  {"role": "user", "content": "Make this script exit with a usage message when it is not given exactly two "
                   "arguments.\n\n" + SH}], SH),
 "sh_question": ([{"role": "user", "content": "Which temporary files does this script create? One short sentence.\n\n" +
                   fenced("sh", SH)}], SH),
}
PROSE = {"sh_question"}
