"""What became of a daemon whose call failed or ran long (dead, hung, or still busy), decided here only.

Readiness, a case's waves, the load scenarios, a test's own client and the session after a
timed-out test all ask these functions, so a daemon stopped in any call is named hung and
killed (taken out when attached), and a dead one replaced, the same way wherever it happened.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_cuzk.backends.protocol import DaemonBackend
from pytest_cuzk.core.compat import stopped_by_pytest_timeout
from pytest_cuzk.core.errors import (
    Cancelled,
    DaemonExited,
    DaemonHung,
    DaemonUnavailable,
    DeadlineExceeded,
    ProofTimeout,
)

__all__ = ["check", "settle", "silent"]


def check(backend: DaemonBackend, what: str, rss_peak: int | None = None) -> None:
    """Between polls of a call: raise DaemonExited if the daemon died, DaemonHung if it cannot run."""
    if not backend.alive():
        raise DaemonExited(f"daemon died during {what}: {backend.death_message(rss_peak)}")
    if stuck := backend.stuck():
        raise DaemonHung(f"daemon hung: {stuck} during {what}")


def silent(backend: DaemonBackend, what: str, probe_timeout_s: float) -> DaemonHung | None:
    """After a call or a proof timed out: a DaemonHung when the daemon answers not even GetStatus."""
    seen = backend.health(probe_timeout_s)
    return None if seen is None else DaemonHung(f"daemon hung: {seen} during {what}")


def settle(backend: DaemonBackend, error: BaseException, what: str, probe_timeout_s: float) -> BaseException:
    """The error to raise for ``error``, the daemon dealt with first.

    Hung: killed, or taken out when attached. Dead or unreachable: replaced at the next
    test. Timed out while it still answers: taken out, since cuzk cannot cancel a proof and
    the next test would share the GPU with it. Anything else is the test's own failure. A test
    that failed while its daemon still runs is settled so too (a call that timed out, or
    pytest-timeout stopping the test while it waited, leaves the daemon untrusted with the next
    test); pytest-timeout's thread method ends pytest instead.
    """
    if isinstance(error, DaemonHung):
        backend.hung(str(error))
        return error
    if isinstance(error, DaemonExited):
        backend.lost(str(error))
        return error
    timed_out = isinstance(error, (ProofTimeout, DeadlineExceeded)) or stopped_by_pytest_timeout(error)
    if not (timed_out or isinstance(error, (DaemonUnavailable, Cancelled))):
        return error
    # A stopped process still holds its socket: new connections time out, which is not a death.
    if stuck := backend.stuck():
        return _caused(DaemonHung(f"daemon hung: {stuck} during {what}"), error, backend.hung)
    # The socket closes a moment before the process can be reaped: say it died, if it did.
    dead = not backend.alive() if timed_out else backend.gone()
    if dead:
        return _caused(
            DaemonExited(f"daemon died during {what}: {backend.death_message()}"), error, backend.lost
        )
    if not timed_out:
        backend.lost(str(error))
        return error
    if hung := silent(backend, what, probe_timeout_s):
        return _caused(hung, error, backend.hung)
    backend.take_out(f"a call timed out during {what} ({error}); cuzk cannot cancel it")
    return error


def _caused(named: BaseException, error: BaseException, deal: Callable[[str], None]) -> BaseException:
    """``named``, raised from ``error``, once ``deal`` has dealt with the daemon by its message."""
    named.__cause__ = error
    deal(str(named))
    return named
