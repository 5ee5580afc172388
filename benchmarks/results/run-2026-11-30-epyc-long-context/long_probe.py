"""Long-file edits (long_tasks.py: textwrap.py, heapq.py) through the official openai client, with vs without the
prediction, alternating per request: run-2026-11-28-spr-heldout/probe.py on these tasks (it writes its res-*.json
beside itself; the ones here were copied from there).

    python long_probe.py PORT ROUNDS [all|task,task] [0|default] [max_tokens]      e.g. 8011 1 all 0 8192"""
import os, runpy, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import long_tasks  # noqa: E402

sys.modules["tasks"] = long_tasks  # probe.py's "from tasks import ..."
runpy.run_path(os.path.join(HERE, "..", "run-2026-11-28-spr-heldout", "probe.py"), run_name="__main__")
