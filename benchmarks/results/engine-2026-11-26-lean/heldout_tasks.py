"""Held-out-style edits through the openai client: same server, with vs without prediction (ABBA)."""
import json, sys, time, statistics, openai
P = "/root/.pyenv/versions/3.13.0/lib/python3.13/"
T = [
 ("go_comments", "/usr/share/doc/git/contrib/persistent-https/socket.go", "go", "Add a one-line doc comment above every function that lacks one.", "A"),
 ("sh_subst", "/usr/share/doc/git/contrib/git-resurrect.sh", "sh", "Replace every backtick command substitution with $(...) and quote variable expansions where missing.", "B"),
 ("yml_timeout", "/usr/lib/google-cloud-sdk/platform/gsutil/third_party/charset_normalizer/.github/workflows/cd.yml", "yaml", "Add `timeout-minutes: 30` to every job.", "A"),
 ("toml_py39", "/usr/lib/google-cloud-sdk/platform/gsutil/third_party/urllib3/pyproject.toml", "toml", "Require Python 3.9 or newer and drop the classifiers for older versions.", "C"),
 ("py_hints", P + "colorsys.py", "python", "Add type hints to every function.", "B"),
 ("py_rename", P + "bisect.py", "python", "Rename the parameters lo and hi to low and high everywhere.", "A"),
 ("py_fstring", P + "sched.py", "python", "Use f-strings instead of %-formatting and add a __repr__ to the scheduler class.", "C"),
 ("md_toc", "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/cargo/README.md", "markdown", "Add a short table of contents after the first heading.", "B"),
 ("go_errors", "/usr/share/doc/git/contrib/persistent-https/client.go", "go", "Wrap every returned error with fmt.Errorf and a short context message using %w.", "A"),
 ("py_fnmatch_log", P + "fnmatch.py", "python", "Add logging: create a module logger and log at debug level when a pattern is compiled.", "C"),
]
def messages(style, lang, code, instr):
    if style == "A":   # system + fenced file, instruction first
        return [{"role": "system", "content": "You are a coding assistant. Reply with the complete updated file in one code block."},
                {"role": "user", "content": f"{instr}\n\n```{lang}\n{code}```"}]
    if style == "B":   # file first, instruction after, no system
        return [{"role": "user", "content": f"Here is my file:\n\n```{lang}\n{code}```\n\n{instr} Return the whole file."}]
    return [{"role": "user", "content": f"{instr} Output only the full modified file, no explanation.\n\n{code}"}]  # unfenced
