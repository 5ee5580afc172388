"""The held-out-like tasks: files that were on this machine (not in foretell's bench), edit and question prompts."""
import sysconfig
SITE = sysconfig.get_paths()["purelib"]  # the venv's site-packages (matplotlib, urllib3)
STDLIB = sysconfig.get_paths()["stdlib"]
def rd(p): return open(p).read()
GO = rd("/usr/share/doc/git/contrib/persistent-https/client.go")
CSS = rd(SITE + "/matplotlib/backends/web_backend/css/mpl.css")
JS = rd(SITE + "/urllib3/contrib/emscripten/emscripten_fetch_worker.js")
CS = rd(STDLIB + "/colorsys.py")
BI = rd(STDLIB + "/bisect.py")
TS = """class User {
  firstName: string = "";
  lastName: string = "";
  username: string = "";
}

export default User;
"""
tasks = {
 "openai_doc_ts": ("Replace the \"username\" property with an \"email\" property. Respond only with code, and with no markdown formatting.", TS, "raw"),
 "go_comments": ("Add a short doc comment above every function that lacks one. Reply with the whole file.", GO, "fence:go"),
 "css_rename": ("Rename the CSS class mpl-message to mpl-status everywhere. Output the complete updated file only.", CSS, "fence:css"),
 "js_const": ("Replace every `var` declaration with `const` or `let` as appropriate. Return the full file.", JS, "fence:javascript"),
 "py_hints": ("Add type hints to every function signature in this module. Respond with the complete file and nothing else.", CS, "raw"),
 "explain_go": ("Explain what this code does, function by function.", GO, "fence:go"),
 "tests_py": ("Write pytest unit tests for this module. Reply with the test file only.", BI, "fence:python"),
 "review_css": ("List three concrete improvements to this stylesheet, with short code examples.", CSS, "fence:css"),
 "py_rename": ("Rename the parameters lo and hi to low and high in every function. Give me the whole updated file.", BI, "fence:python"),
}
def prompt(instr, f, style):
    if style == "raw": return instr + "\n\n" + f
    return instr + "\n\n```" + style.split(":")[1] + "\n" + f + "```"
def prediction_text(f, style):
    if style.endswith(":predfence"): return "```" + style.split(":")[1] + "\n" + f + "```"
    return f
tasks.update({
 "del_comments": ("Remove all comments and docstrings from this code. Output only the resulting code.", BI, "fence:python"),
 "reorder": ("Reorder the functions in this module alphabetically by name. Output the whole file.", CS, "fence:python"),
 "add_func": ("Add a function `clamp_rgb(r, g, b)` at the end of the module that clamps each value to [0, 1]. Reply with the whole file.", CS, "fence:python"),
 "pred_fenced": ("Rename the function insort_left to insert_left everywhere. Give me the whole updated file.", BI, "fence:python:predfence"),
 "go_errwrap": ("Wrap every returned error with fmt.Errorf and a short context message. Return the full file.", GO, "fence:go"),
})
