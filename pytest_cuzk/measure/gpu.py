"""The GPU side of the daemon sampler: NVML read only as often as each figure needs.

A sample costs one NVML call per GPU: its used memory, which a VRAM peak needs at the sampling
rate. Utilisation, SM clock and P-state change slowly (NVML itself averages utilisation over
1/6 s to 1 s), so they are read every ``SLOW_S``. The process lists, the dearest calls, are read
every ``LIST_S`` (and at the first and last sample): between two lists the daemon's VRAM on a GPU
is that GPU's used memory less what the rest (other processes, the driver) held at the last
list, so a daemon's allocation shows at once while the rest is taken to stand still for a second.

Inside a container NVML may list host pids that do not exist here, no sizes, or no processes at
all: then the report falls back to device-wide used memory and says so (``vram_source``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil
import pynvml

from pytest_cuzk.host.nvml import nvml_query
from pytest_cuzk.vocab.units import format_bytes

__all__ = ["IDLE_UTIL_PCT", "LIST_S", "SLOW_S", "GpuFigures", "GpuReader", "GpuReading", "GpuSample"]

SLOW_S = 0.5
LIST_S = 1.0
IDLE_UTIL_PCT = 5  # a GPU whose utilisation never reached this through a case sat idle


@dataclass(frozen=True)
class GpuSample:
    """One device at one instant; None where NVML does not report the value or it was not read."""

    used_bytes: int | None
    util_pct: int | None = None
    sm_clock_mhz: int | None = None
    pstate: int | None = None


@dataclass(frozen=True)
class GpuReading:
    """All devices at one instant, with the daemon's share of their memory."""

    gpus: tuple[GpuSample, ...]
    tree_vram_bytes: int
    listed: bool  # the process lists were read for this sample
    tree_vram_seen: bool = False  # a tree pid was listed with a known size
    unattributed: bool = False  # NVML listed GPU memory it could not tie to a pid of ours
    unlisted_bytes: int = 0  # used memory no listed process accounts for (driver reserve, hidden pids)


@dataclass(frozen=True)
class GpuFigures:
    """One GPU over a case: its memory peak, mean utilisation and SM clock (None where not read)."""

    index: int
    name: str
    used_peak_bytes: int | None
    util_mean_pct: float | None
    util_max_pct: int | None
    sm_clock_mean_mhz: float | None

    @property
    def idle(self) -> bool:
        """Read at least twice and never busy: the daemon did not prove on it."""
        return self.util_max_pct is not None and self.util_max_pct < IDLE_UTIL_PCT

    def describe(self) -> str:
        util = "n/a" if self.util_mean_pct is None else f"{self.util_mean_pct:.0f}%"
        clock = "n/a" if self.sm_clock_mean_mhz is None else f"{self.sm_clock_mean_mhz:.0f} MHz"
        return f"VRAM peak {format_bytes(self.used_peak_bytes)}, utilisation {util}, SM clock {clock}"


def known(values: Iterable[Any]) -> list[Any]:
    return [v for v in values if v is not None]


def mean(values: Iterable[Any]) -> float | None:
    values = known(values)
    return round(statistics.fmean(values), 1) if values else None


class GpuReader:
    """Reads the devices for one sampler; remembers what the rest of each device held at the last list."""

    def __init__(self, handles: Sequence[Any]) -> None:
        self.handles = list(handles)
        self.names = [
            str(nvml_query(pynvml.nvmlDeviceGetName, h) or f"GPU {i}") for i, h in enumerate(handles)
        ]
        self._rest: list[int] = [0] * len(self.handles)  # used memory not the daemon's, per device
        self._listed_at = float("-inf")
        self._slow_at = float("-inf")

    def read(self, now: float, pids: set[int], final: bool = False) -> GpuReading:
        """One sample of every device; the slow figures and the process lists only when they are due."""
        slow = final or now - self._slow_at >= SLOW_S
        listing = final or now - self._listed_at >= LIST_S
        self._slow_at = now if slow else self._slow_at
        self._listed_at = now if listing else self._listed_at
        gpus = tuple(_gpu_sample(h, slow) for h in self.handles)
        if not listing:
            pairs = zip(gpus, self._rest, strict=True)
            ours = sum(max(0, g.used_bytes - rest) for g, rest in pairs if g.used_bytes is not None)
            return GpuReading(gpus, ours, listed=False)
        total, seen, unattributed, listed = 0, False, False, 0
        for i, (handle, gpu) in enumerate(zip(self.handles, gpus, strict=True)):
            per_pid = _gpu_pids(handle)
            if per_pid is None:  # nothing to tie to us: only growth until the next list counts as ours
                unattributed, self._rest[i] = True, gpu.used_bytes or 0
                continue
            listed += sum(known(per_pid.values()))
            mine = 0
            for pid, used in per_pid.items():
                if pid in pids and used is not None:
                    mine, seen = mine + used, True
                elif used is None or not psutil.pid_exists(pid):
                    unattributed = True
            total += mine
            self._rest[i] = max(0, (gpu.used_bytes or 0) - mine)
        unlisted = sum(known(g.used_bytes for g in gpus)) - listed
        return GpuReading(gpus, total, True, seen, unattributed, unlisted)

    def figures(self, readings: Sequence[GpuReading]) -> tuple[GpuFigures, ...]:
        """Each device's figures over the readings."""
        out = []
        for i, name in enumerate(self.names):
            per = [r.gpus[i] for r in readings]
            utils = known(g.util_pct for g in per)
            out.append(
                GpuFigures(
                    index=i,
                    name=name,
                    used_peak_bytes=max(known(g.used_bytes for g in per), default=None),
                    util_mean_pct=mean(utils),
                    util_max_pct=max(utils) if len(utils) >= 2 else None,
                    sm_clock_mean_mhz=mean(g.sm_clock_mhz for g in per),
                )
            )
        return tuple(out)


def _gpu_sample(handle: Any, slow: bool) -> GpuSample:
    mem = nvml_query(pynvml.nvmlDeviceGetMemoryInfo, handle)
    used = mem.used if mem else None
    if not slow:
        return GpuSample(used)
    util = nvml_query(pynvml.nvmlDeviceGetUtilizationRates, handle)
    return GpuSample(
        used_bytes=used,
        util_pct=util.gpu if util else None,
        sm_clock_mhz=nvml_query(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
        pstate=nvml_query(pynvml.nvmlDeviceGetPerformanceState, handle),
    )


def _gpu_pids(handle: Any) -> dict[int, int | None] | None:
    """Bytes per pid on one device (None where NVML gives no size); None when it cannot list processes."""
    queries = (pynvml.nvmlDeviceGetComputeRunningProcesses, pynvml.nvmlDeviceGetGraphicsRunningProcesses)
    listings = [nvml_query(query, handle) for query in queries]
    if all(procs is None for procs in listings):
        return None
    per_pid: dict[int, int | None] = {}
    for procs in listings:
        for p in procs or ():  # a process doing compute and graphics is listed twice
            prev = per_pid.get(p.pid, 0)
            used = p.usedGpuMemory
            per_pid[p.pid] = None if used is None or prev is None else max(prev, used)
    return per_pid
