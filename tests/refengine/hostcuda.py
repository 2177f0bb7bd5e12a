"""A stand-in for the parts of CuPy the GPU prover uses: its CUDA kernels compiled by g++ and run on the CPU.

``RawModule(code=...)`` compiles the very text NVRTC would get (``kernels.kernel_source``) behind
``cuda_host.h`` into a shared library, and a launch runs every thread of the grid there, one after
the other. Device arrays are ``ndarray``, a NumPy subclass: ``asarray`` copies host data in,
``asnumpy`` copies it out, and kernels take nothing else, so a host array handed to a kernel fails
as it would under CuPy. Every result comes out of the compiled kernels; the array functions are
NumPy's, which CuPy's mirror.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

uint32, int32, int64 = np.uint32, np.int32, np.int64  # CuPy takes NumPy's dtypes

SHIM = Path(__file__).with_name("cuda_host.h")
CXX_FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-Wno-unknown-pragmas")
build_dir: Path | None = None
"""Where compiled modules are kept, one per source text: the tests set it."""
NAME = b"host CPU (g++)"
"""The emulated device's name, as ``getDeviceProperties`` gives it."""
UNSET = 0xA5
"""Every byte of an ``empty`` array: a kernel that reads what no one wrote reads the same junk each run."""

_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')
_LAUNCHERS = """
extern "C" void hostcuda_launch_{0}(unsigned int grid, unsigned int block, void** args) {{
    hostcuda::launch({0}, grid, block, args);
}}
extern "C" const char* hostcuda_signature_{0}() {{ return hostcuda::signature({0}); }}
"""


class ndarray(np.ndarray):
    """An array on the emulated device (CuPy's class name)."""


def _on_device(a: Any) -> ndarray:
    """``a``, which must be a device array: CuPy's functions refuse NumPy's."""
    if not isinstance(a, ndarray):
        raise TypeError(f"a host {type(a).__name__} where CuPy takes a device array")
    return a


def asarray(a: Any, dtype: Any = None) -> ndarray:
    """``a`` itself when it is a device array of that dtype, else a copy on the device (an upload)."""
    if isinstance(a, ndarray) and (dtype is None or a.dtype == dtype):
        return a
    return np.array(a, dtype=dtype).view(ndarray)


def asnumpy(a: Any) -> np.ndarray:
    """A host copy of a device array."""
    return np.array(_on_device(a))


def empty(shape: Any, dtype: Any) -> ndarray:
    """Uninitialised device memory: a fixed pattern, so a read of it is deterministic."""
    out = np.empty(shape, dtype=dtype)
    out.reshape(-1).view(np.uint8).fill(UNSET)
    return out.view(ndarray)


def empty_like(a: Any) -> ndarray:
    """``empty`` of ``a``'s shape and dtype."""
    return empty(_on_device(a).shape, a.dtype)


def zeros(shape: Any, dtype: Any) -> ndarray:
    """Zeroed device memory."""
    return np.zeros(shape, dtype=dtype).view(ndarray)


def arange(stop: int, dtype: Any) -> ndarray:
    """0, 1, ..., stop - 1 on the device."""
    return np.arange(stop, dtype=dtype).view(ndarray)


def cumsum(a: Any, dtype: Any) -> ndarray:
    """Inclusive prefix sums."""
    return np.cumsum(_on_device(a), dtype=dtype).view(ndarray)


def searchsorted(a: Any, v: Any, side: str) -> ndarray:
    """Insertion points of ``v`` in the sorted ``a``."""
    return np.searchsorted(_on_device(a), _on_device(v), side=side).view(ndarray)


def stack(arrays: Any) -> ndarray:
    """Device arrays stacked along a new first axis."""
    return np.stack([_on_device(a) for a in arrays]).view(ndarray)


def ascontiguousarray(a: Any) -> ndarray:
    """``a`` when C-contiguous, else a contiguous copy."""
    return np.ascontiguousarray(_on_device(a)).view(ndarray)


class Function:
    """One kernel: ``fn(grid, block, args)`` checks the arguments' types, then runs every thread."""

    local_size_bytes = 0
    """ptxas's per-thread stack: nothing to report for g++ code."""

    def __init__(self, lib: ctypes.CDLL, name: str) -> None:
        self.name = name
        self._launch = lib[f"hostcuda_launch_{name}"]
        self._launch.argtypes = (ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p))
        self._launch.restype = None
        signature = lib[f"hostcuda_signature_{name}"]
        signature.restype = ctypes.c_char_p
        self.params: list[str] = signature().decode().split()

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...]) -> None:
        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments, got {len(args)}")
        values = [self._value(i, p, a) for i, (p, a) in enumerate(zip(self.params, args, strict=True))]
        pointers = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
        self._launch(_extent(grid), _extent(block), pointers)

    def _value(self, i: int, param: str, arg: Any) -> Any:
        """Argument ``i`` in C: a device array's address, or a NumPy scalar of its parameter's type."""
        where = f"{self.name} argument {i} ({param})"
        if param.endswith("*"):
            if not isinstance(arg, ndarray) or arg.dtype.name != param[:-1]:
                raise TypeError(f"{where}: got {type(arg).__name__} of {getattr(arg, 'dtype', None)}")
            if not arg.flags.c_contiguous:
                raise TypeError(f"{where}: a strided view, which a kernel would read as if contiguous")
            return ctypes.c_void_p(arg.ctypes.data)
        if not isinstance(arg, np.generic) or arg.dtype.name != param:
            raise TypeError(f"{where}: got {type(arg).__name__}")
        return np.ctypeslib.as_ctypes_type(arg.dtype)(arg)


def _extent(dims: tuple[int, ...]) -> int:
    """A one-dimensional grid or block's size (the kernels index x only)."""
    x, *rest = dims
    if any(d != 1 for d in rest):
        raise ValueError(f"a launch of {dims}: only x is emulated")
    return x


class RawModule:
    """A kernel source compiled by g++ behind ``cuda_host.h``: a shared library per text, in ``build_dir``."""

    def __init__(self, code: str) -> None:
        names = list(dict.fromkeys(_KERNEL.findall(_preprocess(code))))
        text = "\n".join([SHIM.read_text(), code, *(_LAUNCHERS.format(n) for n in names)])
        self._lib = ctypes.CDLL(str(_build(text)))
        self.names = names

    def get_function(self, name: str) -> Function:
        """The kernel ``name`` (an ``extern "C" __global__`` function of the source)."""
        if name not in self.names:
            raise KeyError(f"no kernel {name!r} in the module")
        return Function(self._lib, name)


def _preprocess(code: str) -> str:
    """The source with its macros expanded, for the names of the kernels it defines (FOR_GROUP makes some)."""
    out = subprocess.run(["g++", "-x", "c++", "-E", "-P", "-"], input=code, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"g++ -E failed:\n{out.stderr}")
    return out.stdout


def _build(text: str) -> Path:
    """The shared library of ``text``, compiled once (a lock keeps xdist's workers from both compiling it)."""
    if build_dir is None:
        raise RuntimeError("hostcuda.build_dir is not set")
    build_dir.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256("\0".join([*CXX_FLAGS, text]).encode()).hexdigest()[:20]
    lib = build_dir / f"module-{key}.so"
    with open(build_dir / f"module-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not lib.exists():
            source, partial = lib.with_suffix(".cpp"), lib.with_suffix(".so.part")
            source.write_text(text)
            command = ["g++", *CXX_FLAGS, "-o", str(partial), str(source)]
            out = subprocess.run(command, capture_output=True, text=True)
            if out.returncode:
                raise RuntimeError(f"g++ failed on {source}:\n{out.stderr}")
            os.replace(partial, lib)
    return lib


class Device:
    """``with Device(ordinal):``: the one emulated device is ordinal 0."""

    def __init__(self, ordinal: int) -> None:
        if ordinal != 0:
            raise ValueError(f"no CUDA device {ordinal}: the host is device 0")

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _properties(ordinal: int) -> dict[str, Any]:
    """What ``GpuMsm`` reads of a device: its name."""
    Device(ordinal)  # the same check of the ordinal
    return {"name": NAME}


def _nothing(*args: Any) -> None:
    """Stack limits and synchronisation: a launch here has finished when it returns."""


runtime = SimpleNamespace(
    getDeviceCount=lambda: 1,
    getDeviceProperties=_properties,
    deviceSetLimit=_nothing,
    deviceSynchronize=_nothing,
)
cuda = SimpleNamespace(Device=Device, runtime=runtime)


class _Pool:
    """CuPy's memory pool: nothing is pooled here, NumPy owns every array."""

    def total_bytes(self) -> int:
        return 0

    def free_all_blocks(self) -> None:
        return None


_POOL = _Pool()


def get_default_memory_pool() -> _Pool:
    """The (empty) memory pool."""
    return _POOL
