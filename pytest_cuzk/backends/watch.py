"""A blocking call to a daemon that ends as soon as the daemon dies or stops, not at its deadline.

A warm-up proof may legitimately take half an hour, so its deadline is long; a daemon that
the OOM killer takes, or that someone SIGSTOPs, during it must still fail the test within a
poll interval, with how it ended.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from pytest_cuzk.backends.protocol import DaemonBackend
from pytest_cuzk.core.errors import DaemonExited, DaemonHung

__all__ = ["POLL_S", "watched"]

POLL_S = 0.2
_T = TypeVar("_T")


def watched(
    backend: DaemonBackend,
    call: Callable[[], _T],
    what: str,
    tick: Callable[[], None],
    poll_s: float = POLL_S,
) -> _T:
    """Run ``call`` in a thread, polling the daemon (and ``tick``); DaemonExited or DaemonHung names ``what``.

    The caller closes its client when this raises, which ends the call left in the thread.
    """
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuzk-watched")
    future = pool.submit(call)
    try:
        while True:
            try:
                return future.result(timeout=poll_s)
            except FutureTimeout:
                tick()
            if not backend.alive():
                raise DaemonExited(f"daemon died during {what}: {backend.death_message()}")
            if stuck := backend.stuck():
                raise DaemonHung(f"daemon hung: {stuck} during {what}")
    finally:
        pool.shutdown(wait=False)
