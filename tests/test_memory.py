"""Freed memory goes back to the OS when the engine runs out of work (RSS after many cancelled requests)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time

import pytest

from foretell.config import EngineConfig, SamplingParams
from foretell.engine import async_engine
from foretell.engine.api import GenerationRequest
from foretell.engine.async_engine import AsyncEngine
from foretell.engine.memory import _malloc_trim, release_free_memory
from foretell.testing import make_tiny_model, make_tiny_tokenizer

glibc = pytest.mark.skipif(_malloc_trim() is None, reason="malloc_trim is glibc's")


@glibc
def test_release_free_memory_returns_freed_heap_pages():
    """200 MB freed in 64 KiB blocks below a live block stays resident (glibc keeps it) until trimmed."""
    script = textwrap.dedent("""
        import ctypes, ctypes.util, os
        from foretell.engine.memory import _malloc_trim, release_free_memory
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD: 64 KiB blocks come from the heap
        page = os.sysconf("SC_PAGE_SIZE")
        rss = lambda: int(open("/proc/self/statm").read().split()[1]) * page >> 20
        blocks = [libc.malloc(64 << 10) for _ in range(3200)]
        for b in blocks:
            ctypes.memset(b, 1, 64 << 10)
        keep = libc.malloc(64)  # a live block above them: the heap's top cannot shrink by itself
        before = rss()
        for b in blocks:
            libc.free(b)
        freed = rss()
        released = release_free_memory()
        print(before, freed, rss(), released)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    before, freed, trimmed, released = out.split()
    assert int(freed) > int(before) - 50  # glibc kept the pages
    assert released == "True" and int(trimmed) < int(freed) - 150  # ... until trimmed


def test_engine_trims_once_each_time_it_runs_out_of_work(monkeypatch):
    calls = []
    monkeypatch.setattr(async_engine, "release_free_memory", lambda: calls.append(time.monotonic()) or True)
    cfg = EngineConfig(measure_cost_curve=False, kv_budget_tokens=2048, max_model_len=256)
    engine = AsyncEngine.from_model(make_tiny_model(), make_tiny_tokenizer(), cfg, "tiny")

    async def run_one() -> None:
        req = GenerationRequest(prompt_ids=[5, 6, 7], max_tokens=8, sampling=SamplingParams(temperature=0.0))
        async for _ in engine.generate(req):
            pass

    try:
        time.sleep(1.2)  # idle from the start: nothing was freed, nothing to trim
        assert calls == []
        for expected in (1, 2):
            asyncio.run(run_one())
            deadline = time.monotonic() + 5
            while len(calls) < expected and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.2)  # idle loop turns (0.5 s each) must not trim again
            assert len(calls) == expected
    finally:
        engine.shutdown()
