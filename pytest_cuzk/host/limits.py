"""What this host can hold: the upper bounds of options and config keys that would otherwise exhaust it.

A bound is the host's own figure, read when it is needed, so its error can say what the host holds:
the longest wait Python can time, the threads it may start, the memory it has free or in all.
"""

from __future__ import annotations

import contextlib
import resource
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from pytest_cuzk.vocab.units import format_bytes

__all__ = [
    "ADDRESS_SPACE_BYTES",
    "WAIT_MAX_S",
    "Bound",
    "address_space",
    "available_memory",
    "clock_resolution_s",
    "thread_limit",
    "total_memory",
    "wait_bound",
]

WAIT_MAX_S = threading.TIMEOUT_MAX
"""The longest wait Python's threading (and so every deadline the plugin sets) can time here."""
ADDRESS_SPACE_BYTES = 1 << 64
"""What a 64-bit process can address: no RSS or VRAM peak can exceed it (cuzk reports uint64 bytes)."""
_THREADS_MAX = Path("/proc/sys/kernel/threads-max")


@dataclass(frozen=True)
class Bound:
    """An upper bound and the host fact it comes from, as an error says it."""

    most: float
    why: str
    unit: str = ""  # "bytes": the bound is shown as a size

    def refuses(self, value: float) -> bool:
        return value > self.most

    def shown(self, value: float | None = None) -> str:
        """The bound (or ``value``) as the error shows it: a size in its unit, a count whole."""
        n = self.most if value is None else value
        if self.unit == "bytes":
            return format_bytes(n)
        return str(int(n)) if float(n).is_integer() and abs(n) < 1e18 else f"{n:.10g}"


def address_space() -> Bound:
    """No size a process holds can exceed what 64 bits address."""
    return Bound(ADDRESS_SPACE_BYTES, "no 64-bit process can hold more", "bytes")


def wait_bound() -> Bound:
    """The longest wait: no deadline or sleep may exceed it."""
    why = f"the longest wait this host can time is {WAIT_MAX_S:.0f} s (threading.TIMEOUT_MAX)"
    return Bound(WAIT_MAX_S, why)


def thread_limit() -> Bound | None:
    """The threads this process may start: RLIMIT_NPROC and the kernel's threads-max, whichever is less."""
    limits: list[tuple[int, str]] = []
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY:
        limits.append((soft, f"ulimit -u allows {soft} processes and threads"))
    with contextlib.suppress(OSError, ValueError):
        most = int(_THREADS_MAX.read_text())
        limits.append((most, f"the kernel allows {most} threads ({_THREADS_MAX})"))
    if not limits:
        return None
    most, why = min(limits)
    return Bound(most, why)


def available_memory() -> Bound:
    """Memory this host can give now without swapping."""
    free = psutil.virtual_memory().available
    return Bound(free, f"this host has {format_bytes(free)} of memory available", "bytes")


def total_memory() -> Bound:
    """All the memory of this host."""
    total = psutil.virtual_memory().total
    return Bound(total, f"this host has {format_bytes(total)} of memory", "bytes")


def clock_resolution_s() -> float:
    """The smallest time step the plugin's clock (``time.monotonic``) can measure."""
    return time.get_clock_info("monotonic").resolution
