"""Models: the packaged models (registry; the default 0.5B, the 1.5B), GGUF conversion, and offline loading.

Importing this package forces the Hugging Face libraries offline (``HF_HUB_OFFLINE=1``): foretell never
fetches weights from a hub. Every load also passes ``local_files_only=True``.
"""

from __future__ import annotations

import os
import sys


def _force_offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    constants = sys.modules.get("huggingface_hub.constants")  # already imported: its flags were read then
    if constants is not None and hasattr(constants, "HF_HUB_OFFLINE"):
        constants.HF_HUB_OFFLINE = True


_force_offline()

from .default_model import (  # noqa: E402
    DEFAULT_MODEL_NAME,
    ChunkPackageMissing,
    ChunkVerificationError,
    ModelError,
    cache_root,
    default_model_dir,
    default_tokenizer,
    packaged_model_dir,
)
from .registry import PACKAGED_MODELS, PackagedModel, find_packaged  # noqa: E402
from .loader import (  # noqa: E402
    ResolvedModel,
    load_model,
    load_tokenizer,
    pick_device,
    pick_dtype,
    resolve_model,
)

__all__ = [
    "DEFAULT_MODEL_NAME",
    "ChunkPackageMissing",
    "ChunkVerificationError",
    "ModelError",
    "PACKAGED_MODELS",
    "PackagedModel",
    "ResolvedModel",
    "cache_root",
    "default_model_dir",
    "default_tokenizer",
    "find_packaged",
    "packaged_model_dir",
    "load_model",
    "load_tokenizer",
    "pick_device",
    "pick_dtype",
    "resolve_model",
]
