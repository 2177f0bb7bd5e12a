"""A daemon's process tree as the kernel sees it: RSS now, and the exact peak (VmHWM) per test.

Polling misses short spikes, so the exact RSS peak comes from the kernel's high-water mark,
reset per test through ``/proc/<pid>/clear_refs`` where the kernel lets us (else the
report says the peak is since process start).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

import psutil

__all__ = ["TREE_REFRESH_S", "HwmScope", "ProcessTree", "clear_refs", "proc_status"]

TREE_REFRESH_S = 0.25  # listing a tree scans all of /proc (~2 ms on a busy host): not on every 10 ms tick
HwmScope = Literal["test", "since_start", "unavailable"]


class ProcessTree:
    """The daemon and its descendants; tolerates any of them vanishing between two reads."""

    def __init__(self, pid: int) -> None:
        self.root_pid = pid
        self.exited = False
        self._procs: dict[int, psutil.Process] = {}
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
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                del self._procs[pid]
                self.exited |= pid == self.root_pid
                continue
            hwm = proc_status(pid).get("VmHWM")
            if hwm is not None:
                self._hwm[pid] = hwm
        return total

    def hwm_bytes(self) -> int | None:
        """Sum of per-process peaks: exact for one process, an upper bound of a tree's joint peak."""
        return sum(self._hwm.values()) if self._hwm else None

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
            return
        self._procs = {p.pid: p for p in (root, *kids)}


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of one process in bytes, from /proc (empty where there is no /proc)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            key, kib = line.split(":", 1)
            values[key] = int(kib.split()[0]) * 1024
    return values


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
