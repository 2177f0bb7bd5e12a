"""Whether a daemon that stopped delivering is hung: one short GetStatus, and what its process is doing."""

from __future__ import annotations

from pytest_cuzk.backends.process import process_state
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.daemon.client import ProvingClient

__all__ = ["probe"]


def probe(address: str, pid: int | None, timeout_s: float) -> str | None:
    """None when GetStatus answers within ``timeout_s``; else what was seen, for the hang message."""
    if not address:
        return "it has no address (not running)"
    try:
        with ProvingClient(address, default_timeout=timeout_s) as client:
            client.status()
        return None
    except CuzkError as exc:
        code = getattr(exc, "code", None)
        seen = (
            f"no answer to GetStatus for {timeout_s:g} s"
            if code is None or code.name == "DEADLINE_EXCEEDED"
            else str(exc)
        )
        return f"{seen}, {process_state(pid)}"
