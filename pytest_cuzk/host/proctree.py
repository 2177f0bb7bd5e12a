"""A daemon's process tree as the kernel sees it: RSS now, and the exact peak (VmHWM) per test.

Polling misses short spikes, so the exact RSS peak comes from the kernel's high-water mark,
reset per test through ``/proc/<pid>/clear_refs`` where the kernel lets us (else the
report says the peak is since process start).

A sample is one read per process, of ``/proc/<pid>/status`` (RSS and VmHWM together), kept
open and re-read with ``pread``: the kernel writes the file anew for each read, and opening
it costs more than reading it. Available memory comes from ``/proc/meminfo`` the same way.
Listing the tree scans every process of the host, so it is done every ``TREE_REFRESH_S``: a
proving daemon's tree is set at its start. psutil stands in where there is no ``/proc``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

import psutil

__all__ = [
    "TREE_REFRESH_S",
    "HwmScope",
    "ProcFile",
    "ProcessTree",
    "available_bytes",
    "clear_refs",
    "host_busy_s",
    "parse_status",
    "proc_status",
]

TREE_REFRESH_S = 2.0  # listing a tree scans all of /proc (1-2 ms on a busy host): not on every tick
HwmScope = Literal["test", "since_start", "unavailable"]
_READ = 16384


def _kib_field(data: bytes, key: bytes) -> int | None:
    """``key:   1234 kB`` in a /proc file, in bytes."""
    start = data.find(key)
    if start < 0:
        return None
    start += len(key)
    return int(data[start : data.index(b"kB", start)]) * 1024


def parse_status(data: bytes) -> dict[str, int]:
    """VmRSS and VmHWM (bytes) from a /proc/<pid>/status text; a zombie's has neither."""
    fields = {"VmRSS": _kib_field(data, b"VmRSS:"), "VmHWM": _kib_field(data, b"VmHWM:")}
    return {k: v for k, v in fields.items() if v is not None}


class ProcFile:
    """A /proc file held open and re-read from the start; None once it cannot be read (process gone)."""

    def __init__(self, path: str) -> None:
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY)
        except OSError:
            self._fd = None

    def read(self) -> bytes | None:
        if self._fd is None:
            return None
        try:
            return os.pread(self._fd, _READ, 0)
        except OSError:
            self.close()
            return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ProcessTree:
    """The daemon and its descendants; tolerates any of them vanishing between reads. Close it after."""

    def __init__(self, pid: int) -> None:
        self.root_pid = pid
        self.exited = False
        self._procs: dict[int, psutil.Process] = {}
        self._files: dict[int, ProcFile] = {}
        self._hwm: dict[int, int] = {}  # last VmHWM read per pid, kept after the process is gone
        self._listed_at = float("-inf")

    def pids(self) -> set[int]:
        return set(self._procs)

    def reset_hwm(self) -> HwmScope:
        """Reset every tree process's VmHWM to its current RSS; say whether that worked for all."""
        self._list(time.monotonic())
        self._hwm.clear()
        scopes = [clear_refs(pid) for pid in self._procs]
        if not scopes or "unavailable" in scopes:
            return "unavailable"
        return "test" if all(s == "test" for s in scopes) else "since_start"

    def sample(self, now: float) -> int:
        """Sum of RSS over the tree now; also refreshes each process's last-seen VmHWM."""
        self._list(now)
        total = 0
        for pid, proc in list(self._procs.items()):
            status = self._status(pid, proc)
            if "VmRSS" not in status:
                del self._procs[pid]
                if file := self._files.pop(pid, None):
                    file.close()
                self.exited |= pid == self.root_pid
                continue
            total += status["VmRSS"]
            if "VmHWM" in status:
                self._hwm[pid] = status["VmHWM"]
        return total

    def cpu_s(self) -> float:
        """CPU seconds the tree's live processes have used (user and system), as the kernel counts them."""
        total = 0.0
        for proc in list(self._procs.values()):
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
        return total

    def hwm_bytes(self) -> int | None:
        """Sum of per-process peaks: exact for one process, an upper bound of a tree's joint peak."""
        return sum(self._hwm.values()) if self._hwm else None

    def close(self) -> None:
        """Close the files held open for sampling."""
        for f in self._files.values():
            f.close()
        self._files.clear()

    def _status(self, pid: int, proc: psutil.Process) -> dict[str, int]:
        if pid not in self._files:
            self._files[pid] = ProcFile(f"/proc/{pid}/status")
        data = self._files[pid].read()
        if data is not None:
            return parse_status(data)
        if Path("/proc/self/status").exists():
            return {}  # there is /proc, and the process is gone
        try:  # no /proc (macOS, Windows): RSS from psutil, no high-water mark
            return {"VmRSS": proc.memory_info().rss}
        except psutil.Error:
            return {}

    def _list(self, now: float) -> None:
        if now - self._listed_at < TREE_REFRESH_S:
            return
        self._listed_at = now
        try:
            root = psutil.Process(self.root_pid)
            kids = root.children(recursive=True)
            if root.status() == psutil.STATUS_ZOMBIE:
                raise psutil.ZombieProcess(self.root_pid)
        except psutil.Error:
            self.exited = True
            self._procs = {}
            self.close()
            return
        self._procs = {p.pid: p for p in (root, *kids)}
        for pid in set(self._files) - set(self._procs):
            self._files.pop(pid).close()


def host_busy_s() -> float:
    """CPU seconds every CPU of the host has been busy since boot (not idle, not waiting for I/O)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def available_bytes(meminfo: ProcFile) -> int:
    """Memory available to new allocations: MemAvailable of an open /proc/meminfo, else psutil's."""
    data = meminfo.read()
    found = _kib_field(data, b"MemAvailable:") if data is not None else None
    return found if found is not None else psutil.virtual_memory().available


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of one process in bytes, from /proc (empty where there is no /proc, or no process)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            return parse_status(f.read())
    except OSError:
        return {}


def clear_refs(pid: int) -> HwmScope:
    """Write "5" to clear_refs, then check the kernel really reset the peak (some sandboxes ignore it)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return "since_start" if proc_status(pid) else "unavailable"
    status = proc_status(pid)
    if "VmHWM" not in status:
        return "unavailable"
    slack = max(2 << 20, status["VmRSS"] // 100)
    return "test" if status["VmHWM"] - status["VmRSS"] <= slack else "since_start"
