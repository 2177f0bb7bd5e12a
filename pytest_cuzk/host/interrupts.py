"""Ctrl-C and SIGTERM while a run that may start daemons is on: one interrupt, then its wind-down.

Python's default for SIGTERM ends the process on the spot: a spawned daemon is left to the
kernel's parent-death signal and the run's private config, log and socket folders stay in
the temp dir. Raised as ``KeyboardInterrupt`` instead, it takes pytest's own interrupt path:
daemons stopped, folders removed (a failure's kept), no baseline saved, exit code 2.

That path takes a while (a traceback to render, daemons to stop). A second Ctrl-C raised in
it would break it where it stands: no summary, a raw traceback, and a run whose exit status
pytest had not yet set to interrupted, saved by ``--benchmark-autosave`` as the next baseline.
So a later Ctrl-C is only acknowledged. A second SIGTERM (a CI runner that will not wait)
ends the process at once, as the default would, but removes the private folder first.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Interrupts"]

HEARD = b"\ncuzk: interrupted already; stopping the daemons (SIGTERM ends the run at once)\n"


class Interrupts:
    """The first SIGINT or SIGTERM raises KeyboardInterrupt; later ones do not break the wind-down.

    Installed only in the main thread and only over the default handlers: one someone else
    installed is theirs to keep. ``before_exit`` runs before a second SIGTERM ends the process.
    """

    def __init__(self, before_exit: Callable[[], None]) -> None:
        self._before_exit = before_exit
        self._replaced: dict[int, Any] = {}
        self.interrupted = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
        for signum, default in defaults.items():
            if signal.getsignal(signum) is default and signum not in self._replaced:
                self._replaced[signum] = signal.signal(signum, self._interrupt)

    def restore(self) -> None:
        """Put back the handlers it replaced (the defaults), once the run is over."""
        for signum, handler in self._replaced.items():
            signal.signal(signum, handler)
        self._replaced.clear()

    def _interrupt(self, signum: int, frame: object) -> None:
        __tracebackhide__ = True  # pytest names the line the run was at, not this one
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt(*(["SIGTERM"] if signum == signal.SIGTERM else []))
        if signum == signal.SIGTERM:
            self._before_exit()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        os.write(2, HEARD)
