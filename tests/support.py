"""Helpers shared by the plugin's end-to-end tests (inner pytest runs)."""

from __future__ import annotations

from pathlib import Path

import psutil

SUITE = Path(__file__).parent / "suite"
PROVE_SOURCE = (SUITE / "test_prove.py").read_text()


def process_gone(pid: int) -> bool:
    """The process has exited (a zombie awaiting its parent counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
