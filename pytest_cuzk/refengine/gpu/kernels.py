"""A CUDA source of this package, compiled by NVRTC through CuPy (cached on disk by CuPy), launched by name.

Every source is compiled with ``mont.cuh`` in front, the field arithmetic that ``ntt.cu`` (Fr)
and ``msm.cu`` (Fp) share.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from typing import Any

__all__ = ["Kernels", "kernel_source"]

_BLOCK = 128


def kernel_source(name: str) -> str:
    """The text NVRTC compiles for ``name`` (``"msm.cu"``, ``"ntt.cu"``): ``mont.cuh``, then the file."""
    here = resources.files(__package__)
    return here.joinpath("mont.cuh").read_text() + "\n" + here.joinpath(name).read_text()


class Kernels:
    """The entry points ``names`` of one source, compiled for the current device (``cupy.cuda.Device``)."""

    def __init__(self, cupy: Any, source: str, names: Iterable[str]) -> None:
        module = cupy.RawModule(code=kernel_source(source))
        self._k = {name: module.get_function(name) for name in names}

    def local_bytes(self) -> int:
        """The most local memory (stack) a thread of any entry point takes, from ptxas."""
        return max(int(getattr(f, "local_size_bytes", 0)) for f in self._k.values())

    def __call__(self, name: str, threads: int, *args: Any) -> None:
        """Launch ``name`` over ``threads`` threads (at least one block) on the current stream."""
        blocks = (threads + _BLOCK - 1) // _BLOCK
        self._k[name]((max(blocks, 1),), (_BLOCK,), args)
