"""Progress of long waits on the terminal: one rewritten line on a TTY, a few plain lines otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

__all__ = ["Progress", "ProgressLine"]

Progress = Callable[[str, int, "int | None"], None]


class ProgressLine:
    """Default download progress: one rewritten line on a terminal, a few plain lines otherwise."""

    def __init__(self, stream: IO[str] | None = None, interval_s: float = 0.25) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s = interval_s if self.stream.isatty() else 5.0
        self._last = 0.0

    def __call__(self, name: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        finished = total is not None and done >= total
        if not finished and now - self._last < self.interval_s:
            return
        self._last = now
        pct = f" ({100 * done // total}%)" if total else ""
        size = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB" if total else f"{done / 1e6:.1f} MB"
        text = f"downloading {name}: {size}{pct}"
        if self.stream.isatty():
            self.stream.write(f"\r{text}" + ("\n" if finished else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
