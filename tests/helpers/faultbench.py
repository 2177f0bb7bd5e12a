"""What the fault benchmark prints for each case, and what it looks for left behind.

One row per case: the fault it reproduces (1-10, as docs/contributing.md lists them), the case, the
first line of the outcome, the seconds it took to fail and what it left (files in the data
cache, the daemons' private folders on disk, daemon processes still running).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from helpers.support import c1_wrapper, hears_like_a_terminal
from pytest_cuzk.core.outcome import first_line

OLD, NEW = c1_wrapper(1, 600_000), c1_wrapper(2, 700_000)  # two versions of one upstream file


def row(fault: int, case: str, outcome: str, took: float, left: str) -> None:
    """Print one case's row: ``fault N | case | outcome | seconds | left: ...``."""
    first = first_line(outcome, "(no output)")
    print(f"\nfault {fault:>2} | {case} | {first[:150]} | {took:6.2f} s | left: {left}")


def files_in(folder: Path) -> str:
    """The files under ``folder`` with their sizes (lock files aside), or 'nothing'."""
    if not folder.exists():
        return "nothing"
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".lock")
    return ", ".join(f"{p.relative_to(folder)} ({p.stat().st_size} B)" for p in files) or "nothing"


def daemons_under(private: Path) -> list[int]:
    """Processes still running whose command line names a path under ``private`` (spawned daemons)."""
    procs = psutil.process_iter(["cmdline"])
    return [p.pid for p in procs if str(private) in " ".join(p.info["cmdline"] or [])]


def leftovers(private: Path, wait_s: float = 5.0) -> str:
    """The private folders under ``private`` and the daemons still running there (waiting for stragglers)."""
    deadline = time.monotonic() + wait_s
    while (pids := daemons_under(private)) and time.monotonic() < deadline:
        time.sleep(0.1)
    folders = sorted(str(p.relative_to(private)) for p in private.glob("*/*")) or sorted(
        p.name for p in private.iterdir()
    )
    return f"disk: {', '.join(folders) or 'nothing'}; processes: {', '.join(map(str, pids)) or 'none'}"


@dataclass
class Run:
    """An inner pytest run: its output, exit code, wall time and what it left under its TMPDIR."""

    out: str
    code: int
    took: float
    left: str

    def line(self, text: str) -> str:
        """The first line of the output that holds ``text`` ('' when none does)."""
        return next((line for line in self.out.splitlines() if text in line), "")

    def duration(self, test: str, when: str = "call") -> float:
        """A test phase's seconds from ``--durations=0``."""
        match = re.search(rf"([\d.]+)s {when}\s+\S*{re.escape(test)}", self.out)
        assert match, f"no {when} duration for {test} in the --durations output"
        return float(match.group(1))


def run_pytest(
    cwd: Path,
    private: Path,
    args: list[str],
    env: dict[str, str] | None = None,
    signal_when: Callable[[], bool] | None = None,
    sig: int = signal.SIGINT,
) -> Run:
    """Run pytest in ``cwd`` with TMPDIR=``private``; send ``sig`` once ``signal_when()`` holds.

    The run hears ``sig`` as a terminal's would, even where this one was started in the background.
    """
    private.mkdir(exist_ok=True)
    ours = ("PYTEST_CUZK_", "PYTEST_XDIST_", "CUZK_REF")  # none of this run's options, faults or worker id
    environ = {k: v for k, v in os.environ.items() if not k.startswith(ours)} | (env or {})
    environ["TMPDIR"] = str(private)
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=hears_like_a_terminal(sig),
    )  # fmt: skip
    if signal_when is not None:
        deadline = time.monotonic() + 120
        while not signal_when() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(sig)
    out = proc.communicate(timeout=300)[0]
    return Run(out, proc.returncode, time.monotonic() - started, leftovers(private))
