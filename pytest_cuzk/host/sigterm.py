"""SIGTERM as Ctrl-C, while a run that may start daemons is on.

Python's default for SIGTERM ends the process on the spot: a spawned daemon is left to the
kernel's parent-death signal and the run's private config, log and socket folders stay in
the temp dir. Raised as ``KeyboardInterrupt`` instead, it takes pytest's own interrupt path:
daemons stopped, folders removed (a failure's kept), exit code 2.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["SigtermAsInterrupt"]


class SigtermAsInterrupt:
    """The first SIGTERM raises KeyboardInterrupt; a second ends the process, as the default would.

    Installed only in the main thread and only over the default handler: one someone else
    installed is theirs to keep.
    """

    def __init__(self) -> None:
        self._replaced: Any = None
        self._installed = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        self._replaced = signal.signal(signal.SIGTERM, self._interrupt)
        self._installed = True

    def restore(self) -> None:
        """Put back the handler it replaced (the default), once the run is over."""
        if self._installed:
            signal.signal(signal.SIGTERM, self._replaced)
            self._installed = False

    @staticmethod
    def _interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt("SIGTERM")
