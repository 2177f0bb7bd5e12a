"""One NVML for the whole process, shared by the sampler, host info and the reference engine.

NVML is a process-wide library: ``nvmlShutdown`` by one user pulls it from under every
other. ``nvml_session()`` counts its users and initialises on the first and shuts down
after the last, so a GetStatus of an in-process reference engine never ends NVML under a
running sampler. It says why NVML is unusable instead of raising.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pynvml

__all__ = ["NVML_ERRORS", "nvml_handles", "nvml_query", "nvml_session"]

NVML_ERRORS = (pynvml.NVMLError, pynvml.NVMLLibraryMismatchError)
_T = TypeVar("_T")


class _Library:
    """The process's NVML users: a count under a lock (NVML itself is process-global)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0

    def acquire(self) -> str | None:
        with self.lock:
            try:
                if self.users == 0:
                    pynvml.nvmlInit()
            except NVML_ERRORS as exc:
                return f"NVML unavailable: {exc}"
            self.users += 1
            return None

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0:
                nvml_query(pynvml.nvmlShutdown)


_LIBRARY = _Library()


@contextmanager
def nvml_session() -> Iterator[str | None]:
    """Hold NVML initialised; yields None when usable, else the reason it is not (no library, no driver)."""
    why = _LIBRARY.acquire()
    if why:
        yield why
        return
    try:
        yield None
    finally:
        _LIBRARY.release()


def nvml_query(fn: Callable[..., _T], *args: Any) -> _T | None:
    """Call one NVML function; None where the device or driver does not support it."""
    try:
        return fn(*args)
    except NVML_ERRORS:
        return None


def nvml_handles() -> list[Any]:
    """Device handles in NVML order (inside an `nvml_session`); empty when none can be read."""
    count = nvml_query(pynvml.nvmlDeviceGetCount) or 0
    handles = (nvml_query(pynvml.nvmlDeviceGetHandleByIndex, i) for i in range(count))
    return [h for h in handles if h is not None]
