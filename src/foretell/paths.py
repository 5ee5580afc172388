"""Where foretell keeps its caches (converted models, cost curves)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$FORETELL_CACHE_DIR`` if set, else the platform's user cache dir for foretell."""
    env = os.environ.get("FORETELL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("foretell"))
