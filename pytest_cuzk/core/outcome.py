"""The one place an error of the plugin becomes a test's outcome.

Inside cuzk fixtures and suite cases, what the plugin raises is a statement about the run,
not a crash of the test code: it becomes a failure (or error, in setup) with the message
alone, no traceback through the plugin. Data that cannot be had fails too, unless the user
asked for skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_cuzk.core.errors import CuzkError, DataUnavailable

__all__ = ["as_outcome", "as_usage_error", "first_line", "reason_line", "report_message"]


@contextmanager
def as_outcome(allow_missing: bool = False) -> Iterator[None]:
    """Turn a ``CuzkError`` raised inside the block into the test's pytest outcome.

    A case that cannot run fails (a CI gate must not go green having proved nothing);
    ``allow_missing`` (``--cuzk-allow-missing``) makes missing data a skip instead.
    ``from None``: pytest shows the message once, not chained under the error it replaces.
    """
    try:
        yield
    except DataUnavailable as exc:
        if allow_missing:
            raise pytest.skip.Exception(str(exc)) from None
        raise pytest.fail.Exception(
            f"{exc} (or pass --cuzk-allow-missing to skip it)", pytrace=False
        ) from None
    except CuzkError as exc:
        raise pytest.fail.Exception(str(exc), pytrace=False) from None


@contextmanager
def as_usage_error() -> Iterator[None]:
    """At configure time a ``CuzkError`` is bad input: pytest's UsageError, which stops the run at once."""
    try:
        yield
    except CuzkError as exc:
        raise pytest.UsageError(str(exc)) from None


def report_message(report: pytest.TestReport) -> str:
    """What a failed or skipped report says: the skip's message, or the error's own message.

    Never the traceback: its last line is a source line, and a message's last line (a log
    tail, a hint) is not the one that names what failed.
    """
    longrepr: Any = report.longrepr
    if isinstance(longrepr, (tuple, list)) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    return (crash.message if crash is not None else report.longreprtext).removeprefix("Failed: ")


def reason_line(report: pytest.TestReport) -> str:
    """Why a test did not run, in one line: the first line of its message, the sentence naming what failed."""
    return first_line(report_message(report), "setup failed")


def first_line(text: str, default: str) -> str:
    """A message's first non-blank line (a log tail or a hint may follow it), else ``default``."""
    return next((line.strip() for line in text.splitlines() if line.strip()), default)
