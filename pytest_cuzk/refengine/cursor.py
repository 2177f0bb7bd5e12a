"""A bounds-checked cursor over bytes, shared by the key, PCE and vanilla-proof readers.

Each reader says what running past the end means for its format (a truncated key
file, a truncated PCE file, bad vanilla data) through ``truncated``.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["Cursor"]

B = TypeVar("B", bytes, memoryview)


class Cursor(Generic[B]):
    """Reads ``raw`` front to back; ``truncated(what, n)`` builds the error for a short read."""

    def __init__(self, raw: B) -> None:
        self.raw: B = raw
        self.pos = 0

    def truncated(self, what: str, n: int) -> Exception:
        """The error for reading ``n`` bytes of ``what`` past the end (each format words its own)."""
        return ValueError(f"unexpected end of input reading {what} ({n} bytes at byte {self.pos})")

    def take(self, n: int, what: str = "") -> B:
        """The next ``n`` bytes (same type as ``raw``); raises ``truncated`` past the end."""
        if self.pos + n > len(self.raw):
            raise self.truncated(what, n)
        out = self.raw[self.pos : self.pos + n]
        self.pos += n
        return out
