"""Long-file tasks (the brief's 600-line case): stdlib files through the official client."""
import sysconfig
STDLIB = sysconfig.get_paths()["stdlib"]
TW = open(STDLIB + "/textwrap.py").read()
HQ = open(STDLIB + "/heapq.py").read()
tasks = {
 "tw_rename": ("Rename the method `_munge_whitespace` to `_normalize_whitespace` everywhere. Reply with the whole updated file.", TW, "fence:python"),
 "hq_rename": ("Rename the function `_siftdown` to `_sift_down` everywhere (definitions and calls). Output the complete updated file.", HQ, "fence:python"),
}
def prompt(instr, f, style):
    if style == "raw": return instr + "\n\n" + f
    return instr + "\n\n```" + style.split(":")[1] + "\n" + f + "```"
def prediction_text(f, style):
    return f
