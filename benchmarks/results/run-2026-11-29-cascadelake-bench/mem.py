"""Resident memory after start-up (cost curve not measured), after a malloc_trim: python mem.py LABEL [MODEL]."""
import ctypes, gc, os, sys
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
model = sys.argv[2] if len(sys.argv) > 2 else "default"
eng, _ = LLMEngine.from_config(EngineConfig(model=model, measure_cost_curve=False))
gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
print(sys.argv[1], model, "panel layers", eng.runner.panel_layers, f"RSS after start-up {rss:.0f} MB")
