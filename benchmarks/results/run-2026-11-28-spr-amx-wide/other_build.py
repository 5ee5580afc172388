"""The AMX linear of another cpu_gemm.c (built beside this one), with the argument types of this build's: what the
A/B scripts here swap into ``CpuGemm._amx``."""
import ctypes, tempfile
from pathlib import Path
from foretell.engine import cpu_gemm


def other_linear_amx(source: str, like):
    """``foretell_linear_amx`` of ``source`` built into a fresh directory, typed as ``like`` (this build's)."""
    own = cpu_gemm.SOURCE
    cpu_gemm.SOURCE = Path(source)
    try:
        fn = ctypes.CDLL(str(cpu_gemm._build(Path(tempfile.mkdtemp())))).foretell_linear_amx
    finally:
        cpu_gemm.SOURCE = own
    fn.restype, fn.argtypes = like.restype, like.argtypes
    return fn
