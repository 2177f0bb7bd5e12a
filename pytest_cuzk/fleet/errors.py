"""The one error of ``cuzk-perf``: what went wrong and what to do, and the exit status it ends with."""

from __future__ import annotations

__all__ = ["NOTHING", "USAGE", "PerfError"]

USAGE = 2  # bad input: an option, a file, a database that cannot be read
NOTHING = 1  # a well-formed question with no answer worth a zero: nothing fits, nothing selected


class PerfError(Exception):
    """Raised by a subcommand; ``cli.main`` prints it after the subcommand's name and exits ``code``."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code
