"""Run pass_split with the engine's CPU GEMM loaded from another library (LIB env)."""
import os, sys, ctypes, runpy
from pathlib import Path
from foretell.engine import cpu_gemm
lib = os.environ["LIB"]
orig_build = cpu_gemm._build
cpu_gemm._build = lambda cache_dir: Path(lib)
sys.argv = ["pass_split.py", *sys.argv[1:]]
runpy.run_path("str(Path(__file__).with_name("pass_split.py"))", run_name="__main__")
