"""The held-out A/B of engine-2026-11-26-epyc-head-attention/ab_servers.py (same arguments: an optional task list)."""
import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).parent.parent / "engine-2026-11-26-epyc-head-attention" / "ab_servers.py"), run_name="__main__")
