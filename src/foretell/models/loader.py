"""Turning a ``--model`` argument into a loaded model: resolve the spec, pick device and dtype, load offline.

Accepted specs: ``None`` or ``"default"`` (the packaged default model), a packaged model's short or full name
(``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``; see :mod:`foretell.models.registry`), a local Hugging Face
directory with safetensors weights, or a local ``.gguf`` file (converted once into the cache, like the default model).
Nothing is ever downloaded: every load passes ``local_files_only=True`` and the package forces the Hugging
Face libraries offline.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .default_model import (
    ModelError,
    cached_conversion,
    convert_gguf,
    models_cache_dir,
    packaged_model_dir,
    sha256_file,
)
from .gguf_blocks import attach_blocks
from .registry import find_packaged, packaged_names

if TYPE_CHECKING:
    import torch

_PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


@dataclass(frozen=True)
class ResolvedModel:
    path: Path  # a local Hugging Face directory with safetensors weights
    name: str  # what the server reports as the model name


def resolve_model(spec: str | os.PathLike | None, progress: bool = True) -> ResolvedModel:
    """Map a model spec to a local safetensors Hugging Face directory (converting a GGUF if needed)."""
    packaged = find_packaged(None if spec is None else str(spec))
    if packaged is not None and "/" in str(spec) and Path(spec).expanduser().is_dir():
        packaged = None  # a local directory that happens to be named like the upstream repository: it wins
    if packaged is not None:
        return ResolvedModel(packaged_model_dir(packaged, progress=progress), packaged.name)
    path = Path(spec).expanduser()
    if path.is_dir():
        _check_hf_dir(path)
        return ResolvedModel(path.resolve(), path.resolve().name)
    if path.is_file() and path.suffix.lower() == ".gguf":
        return ResolvedModel(gguf_model_dir(path, progress=progress), _gguf_name(path))
    if path.is_file():
        raise ModelError(
            f"--model {spec}: a single file must be a .gguf; for other formats pass the Hugging Face model "
            "directory (config.json + *.safetensors)"
        )
    raise ModelError(
        f"--model {spec}: no such directory or .gguf file. foretell never downloads models: pass 'default', "
        f"a packaged model ({', '.join(packaged_names())}), a local Hugging Face directory with safetensors "
        "weights, or a local .gguf file"
    )


def _check_hf_dir(path: Path) -> None:
    if not (path / "config.json").is_file():
        raise ModelError(f"--model {path}: not a Hugging Face model directory (no config.json)")
    if any(path.glob("*.safetensors")):
        return
    pickles = sorted(p.name for pattern in _PICKLE_WEIGHTS for p in path.glob(pattern))
    if pickles:
        raise ModelError(
            f"--model {path}: only PyTorch pickle weights found ({', '.join(pickles[:3])}); loading a pickle can "
            "run arbitrary code, so foretell loads safetensors only. Convert it once, e.g. "
            "AutoModelForCausalLM.from_pretrained(dir).save_pretrained(new_dir) in a trusted environment"
        )
    raise ModelError(f"--model {path}: no *.safetensors weights in this directory")


def _gguf_name(path: Path) -> str:
    return path.stem.lower()


def gguf_model_dir(path: Path, progress: bool = True) -> Path:
    """A .gguf file converted (once) into a bf16 safetensors directory in the cache.

    Keyed by the file's absolute path, size and mtime, so a changed file is converted again; the marker also
    records its sha256.
    """
    path = Path(path).resolve()
    st = path.stat()
    identity = {"source": str(path), "source_size": st.st_size, "source_mtime_ns": st.st_mtime_ns}
    key = hashlib.sha256(repr(sorted(identity.items())).encode()).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", path.stem)[:80] or "model"
    final = models_cache_dir() / f"gguf-{stem}-{key}-bf16"

    def build(tmp: Path) -> dict[str, Any]:
        if progress:
            print(f"foretell: converting {path.name} (GGUF -> bf16, one time) into {final}", file=sys.stderr)
        digest = sha256_file(path, progress=progress)
        facts = convert_gguf(path, tmp, progress=progress)
        return {"source_sha256": digest, **facts}

    return cached_conversion(final, identity, build, progress=progress)


# ------------------------------------------------------------------------------------- device and dtype


def pick_device(requested: str | None = None) -> "torch.device":
    """``None``/``"auto"``: CUDA when available, else CPU. Otherwise the named device, checked to exist."""
    import torch

    if requested is None or str(requested).lower() == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(str(requested))
    except (RuntimeError, ValueError) as exc:
        raise ModelError(f"--device {requested}: not a device torch knows ({exc})") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelError(f"--device {requested}: CUDA is not available in this torch build / machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ModelError(f"--device {requested}: only {torch.cuda.device_count()} CUDA device(s)")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ModelError(f"--device {requested}: MPS is not available")
    return device


_DTYPE_NAMES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}


def cpu_supports_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (x86 AVX512-BF16 or AMX; Arm BF16)."""
    import torch

    cpu = getattr(torch, "cpu", None)
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        fn = getattr(cpu, probe, None)
        try:
            if fn is not None and fn():
                return True
        except Exception:  # private helpers: absent or failing on some builds
            pass
    flags = _cpu_flags()
    if flags & {"avx512_bf16", "amx_bf16"}:
        return True
    return platform.machine().lower() in ("aarch64", "arm64") and "bf16" in flags


def cpu_has_amx() -> bool:
    """Whether this CPU has AMX tiles (Intel Sapphire Rapids and later): oneDNN's bf16 GEMM runs on them."""
    import torch

    probe = getattr(getattr(torch, "cpu", None), "_is_amx_tile_supported", None)
    try:
        if probe is not None and probe():
            return True
    except Exception:  # a private helper: absent or failing on some builds
        pass
    return bool(_cpu_flags() & {"amx_tile", "amx_bf16"})


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key = line.split(":", 1)[0].strip().lower()
                if key in ("flags", "features"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def pick_dtype(device: "str | torch.device", requested: "str | torch.dtype | None" = None) -> "torch.dtype":
    """``None``/``"auto"``: bf16 on CUDA (fp16 where bf16 is unsupported), bf16 on CPUs with native bf16,
    fp32 on other CPUs. Or an explicit ``bfloat16``/``float16``/``float32`` (aliases bf16, fp16, half, fp32)."""
    import torch

    if isinstance(requested, torch.dtype):
        if requested not in (torch.bfloat16, torch.float16, torch.float32):
            raise ModelError(f"--dtype {requested}: use bfloat16, float16 or float32")
        return requested
    kind = torch.device(device).type if not isinstance(device, torch.device) else device.type
    if requested is None or str(requested).lower() == "auto":
        if kind == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if kind == "cpu":
            return torch.bfloat16 if cpu_supports_bf16() else torch.float32
        return torch.float32
    name = _DTYPE_NAMES.get(str(requested).lower().removeprefix("torch."))
    if name is None:
        raise ModelError(f"--dtype {requested}: use auto, bfloat16, float16 or float32")
    return getattr(torch, name)


# ---------------------------------------------------------------------------------------------- loading


def load_model(
    path: str | os.PathLike,
    dtype: "torch.dtype",
    device: "str | torch.device",
    trust_remote_code: bool = False,
) -> Any:
    """A causal LM from a local safetensors directory, in eval mode, on ``device``, without grads."""
    from transformers import AutoModelForCausalLM

    path = Path(path)
    _check_hf_dir(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(path),
            dtype=dtype,
            local_files_only=True,
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
        )
    except ValueError as exc:
        if "trust_remote_code" not in str(exc):
            raise
        raise ModelError(
            f"--model {path}: this model needs its own Python code (auto_map in config.json); foretell does "
            "not run code shipped with a model, so it serves only architectures transformers implements"
        ) from None
    model.to(device)
    model.eval()
    model.requires_grad_(False)
    attach_blocks(model, path)  # a converted GGUF's quantized blocks, for foretell's CPU kernel
    return model


def load_tokenizer(path: str | os.PathLike, trust_remote_code: bool = False) -> Any:
    """The tokenizer saved in a local model directory (chat template included)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=trust_remote_code)
