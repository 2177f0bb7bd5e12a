"""Many multiples of one point: the trusted setup's bases, a table and one addition a window.

The setup multiplies the generator by a scalar for every variable and every power of tau:
four G1 points and one G2 point per constraint. py-arkworks' ``point * Scalar`` runs a full
double-and-add each time (~170 us in G1, ~500 us in G2); with the multiples d * 2^(c*w) * P
tabulated once, each product is at most ceil(255 / c) additions (~1 us in G1, ~4.5 us in G2),
so a 2^18-constraint setup takes seconds a kind instead of minutes. The result is the same
point: the setup's keys do not change.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from pytest_cuzk.refengine.field import R

__all__ = ["FixedBase"]

WINDOW_BITS = 10
"""1024 multiples a window, 26 windows: a table of ~27k points, built in ~30 ms (G1) or ~120 ms (G2)."""


class _Point(Protocol):
    def __add__(self: P, other: P, /) -> P: ...


P = TypeVar("P", bound=_Point)


class FixedBase(Generic[P]):
    """``mul(k)`` is k * base, from a table of the base's windowed multiples."""

    def __init__(
        self, base: P, identity: P, bits: int = R.bit_length(), window_bits: int = WINDOW_BITS
    ) -> None:
        self._bits = bits
        self._c = window_bits
        self._mask = (1 << window_bits) - 1
        self._identity = identity
        self._table: list[list[P]] = []
        step = base  # 2^(c*w) * base
        for _ in range(-(-bits // window_bits)):
            row, acc = [identity], identity
            for _ in range(self._mask):
                acc = acc + step
                row.append(acc)
            self._table.append(row)
            step = acc + step

    def mul(self, k: int) -> P:
        """The point k * base, for 0 <= k < 2^bits (field elements, reduced mod r)."""
        if k < 0 or k >> self._bits:
            raise ValueError(f"a scalar for the fixed-base table must lie in [0, 2^{self._bits})")
        acc, c, mask = self._identity, self._c, self._mask
        for row in self._table:
            if not k:
                break
            digit = k & mask
            if digit:
                acc = acc + row[digit]
            k >>= c
        return acc

    def muls(self, ks: list[int]) -> list[P]:
        """``mul`` of each scalar, in order."""
        return [self.mul(k) for k in ks]
