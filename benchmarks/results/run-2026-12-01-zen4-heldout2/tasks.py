"""A second set of held-out-like tasks (2026-12-01): files on this machine not used before, edits of other kinds."""
import sysconfig
SITE = sysconfig.get_paths()["purelib"]
STDLIB = sysconfig.get_paths()["stdlib"]
def rd(p): return open(p).read()
HW = rd("/etc/init.d/hwclock.sh")
RERERE = rd("/usr/share/doc/git/contrib/rerere-train.sh")
JUMP = rd("/usr/share/doc/git/contrib/git-jump/git-jump")
FNM = rd(STDLIB + "/fnmatch.py")
GRAPH = rd(STDLIB + "/graphlib.py")
YAML = rd(SITE + "/markdown_it/port.yaml")
tasks = {
 "fnm_cache": ("Change the lru_cache maxsize in this module to 1024. Reply with the whole file.", FNM, "fence:python"),
 "graph_repr": ("Add a __repr__ method to the TopologicalSorter class that shows how many nodes it holds. Reply with the complete file.", GRAPH, "fence:python"),
 "sh_quote": ("Quote every unquoted variable expansion in this script. Return the full script.", HW, "fence:sh"),
 "sh_backticks": ("Replace backtick command substitutions with $(...). Output the whole script only.", RERERE, "fence:sh"),
 "jump_sete": ("Add `set -e` right after the shebang line. Return the complete script.", JUMP, "raw"),
 "yaml_version": ("Change the version to 15.0.0 and the date to Jan 5, 2025. Reply with the whole YAML file.", YAML, "fence:yaml"),
 "fnm_docs": ("Rewrite the docstrings of this module in a more concise style. Reply with the whole file.", FNM, "fence:python"),
 "graph_explain": ("What does the prepare method do? Answer briefly.", GRAPH, "fence:python"),
}
def prompt(instr, f, style):
    if style == "raw": return instr + "\n\n" + f
    return instr + "\n\n```" + style.split(":")[1] + "\n" + f + "```"
def prediction_text(f, style):
    if style.endswith(":predfence"): return "```" + style.split(":")[1] + "\n" + f + "```"
    return f
