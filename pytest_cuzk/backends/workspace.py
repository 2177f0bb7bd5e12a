"""The run's private directory for spawned daemons' configs, sockets and logs, made on first use."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

__all__ = ["Workspace"]


class Workspace:
    """A 0700 temp dir, created only when a daemon is spawned; kept when a test failed."""

    def __init__(self, prefix: str = "cuzk-") -> None:
        self._prefix = prefix
        self._root: Path | None = None
        self.keep = False

    def subdir(self, prefix: str) -> Path:
        """A fresh directory for one daemon start."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix=self._prefix))
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self._root))

    @property
    def root(self) -> Path | None:
        return self._root

    def cleanup(self) -> None:
        """Remove the directory unless a failing test's messages point into it."""
        if self._root is not None and not self.keep:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._root)
