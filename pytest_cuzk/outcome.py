"""The one place an error of the plugin becomes a test's outcome.

Inside cuzk fixtures and suite cases, what the plugin raises is a statement about the run,
not a crash of the test code: it becomes a failure (or error, in setup) with the message
alone, no traceback through the plugin. Data that cannot be had skips the kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from .errors import CuzkError, DataUnavailable

__all__ = ["as_outcome"]


@contextmanager
def as_outcome() -> Iterator[None]:
    """Turn a ``CuzkError`` raised inside the block into the test's pytest outcome.

    ``from None``: pytest shows the message once, not chained under the error it replaces.
    """
    try:
        yield
    except DataUnavailable as exc:
        raise pytest.skip.Exception(str(exc)) from None
    except CuzkError as exc:
        raise pytest.fail.Exception(str(exc), pytrace=False) from None
