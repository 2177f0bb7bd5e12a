"""Every long wait on the terminal: the stage, the time it has taken and its timeout.

A real cuzk takes minutes to get ready (44 GiB of SRS, a PCE extraction), and a silent
terminal looks hung. ``ProgressLine.stage`` opens a wait and the wait's own poll loop calls
``tick``: on a TTY one line is rewritten every half second once the wait has lasted a
second; without a TTY (CI logs) a line is written every 15 s, so short waits stay quiet.
Downloads report through ``download`` inside their stage, bytes or none, and always end with one
line naming the file.
It is called from the main thread only, and writes past pytest's capture through the
``stream`` it is given, which starts it on a line of its own (the session's ends pytest's line of
a test file's results first, so ``test_prove.py`` and a progress line are never glued together).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO

__all__ = ["ProgressLine"]

Stream = Callable[[], AbstractContextManager[IO[str]]]  # a stream at the start of a line
TTY_AFTER_S, TTY_EVERY_S = 1.0, 0.5
LOG_EVERY_S = 15.0


def _stderr() -> AbstractContextManager[IO[str]]:
    return contextlib.nullcontext(sys.stderr)


@dataclass
class _Stage:
    what: str
    timeout_s: float | None
    started: float
    shown: float = 0.0  # when it was last written; 0: not yet


class ProgressLine:
    """The wait in progress, on the terminal."""

    def __init__(self, stream: Stream = _stderr, tty: bool | None = None) -> None:
        self._stream = stream
        self._tty = tty
        self._stages: list[_Stage] = []
        self._open_line = False

    @property
    def tty(self) -> bool:
        if self._tty is None:
            with self._stream() as out:
                self._tty = bool(getattr(out, "isatty", lambda: False)())
        return self._tty

    @contextlib.contextmanager
    def stage(self, what: str, timeout_s: float | None = None) -> Iterator[None]:
        """A wait: ``what`` is shown with the time taken (and ``timeout_s``) while the block runs."""
        stage = _Stage(what, timeout_s, time.monotonic())
        self._stages.append(stage)
        try:
            yield
        finally:
            self._stages.remove(stage)
            if stage.shown and self.tty:
                self._write(f"{self._text(stage, '')}: done", end=True)

    def tick(self, detail: str = "") -> None:
        """Show the innermost wait if it is due; ``detail`` says how far it is (``3 of 8 proofs``)."""
        if not self._stages:
            return
        stage, now = self._stages[-1], time.monotonic()
        after, every = (TTY_AFTER_S, TTY_EVERY_S) if self.tty else (LOG_EVERY_S, LOG_EVERY_S)
        if now - stage.started < after or (stage.shown and now - stage.shown < every):
            return
        stage.shown = now
        self._write(self._text(stage, detail), end=not self.tty)

    def say(self, text: str) -> None:
        """One line that must be seen now (a trust-on-first-use pin), on its own line."""
        self._write(text, end=True)

    def download(self, name: str, done: int, total: int | None) -> None:
        """A download's progress, in its stage (``downloading NAME``); its end is always said, once."""
        size = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB" if total else f"{done / 1e6:.1f} MB"
        pct = f" ({100 * done // total}%)" if total else ""
        if total is not None and done >= total:
            self._write(f"downloading {name}: {size}{pct}", end=True)
            if self._stages:  # that line ends the wait's: its stage has no "done" to add
                self._stages[-1].shown = 0.0
        else:
            self.tick(f"{size}{pct}")

    def _text(self, stage: _Stage, detail: str) -> str:
        took = time.monotonic() - stage.started
        limit = f" of {stage.timeout_s:.0f} s" if stage.timeout_s else ""
        return f"cuzk: {stage.what}{f' ({detail})' if detail else ''}: {took:.0f} s{limit}"

    def _write(self, text: str, end: bool) -> None:
        with self._stream() as out:
            if self.tty:
                start = "\r" if self._open_line else ""
                out.write(f"{start}{text}\x1b[K" + ("\n" if end else ""))
                self._open_line = not end
            else:
                out.write(text + "\n")
            out.flush()
