"""Giving freed memory back to the operating system when the engine goes idle.

KV buffers and activations are freed when requests finish or are cancelled, but glibc's allocator keeps
freed heap pages (and, once large blocks have been freed, serves later large blocks from the heap too), so
the process's RSS stays at its high-water mark: after 1000 cancelled streams the server held ~440 MB more
than at start with nothing running. ``malloc_trim(0)`` returns those pages; it is cheap (milliseconds)
and called once each time the engine runs out of work. Elsewhere than glibc it is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger("foretell.engine")


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


def release_free_memory() -> bool:
    """Return the allocator's free pages to the OS; True if anything was released."""
    fn = _malloc_trim()
    if fn is None:
        return False
    try:
        return bool(fn(0))
    except OSError:  # pragma: no cover - defensive: never let trimming fail the engine
        log.debug("malloc_trim failed", exc_info=True)
        return False
