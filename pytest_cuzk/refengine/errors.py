"""The reference engine's one error base: every error cuzk-ref raises on purpose derives from it.

``cuzk-ref``'s command line turns any of them into one ``Error: ...`` line and exit 1; the
engine turns a job's into its FAILED ``error_message``. The plugin's own tree is
``pytest_cuzk.core.errors``; the two programs share none, as they share no process.
"""

from __future__ import annotations

__all__ = ["RefEngineError"]


class RefEngineError(Exception):
    """An error of cuzk-ref's own making; ``str(exc)`` is the sentence to show."""
