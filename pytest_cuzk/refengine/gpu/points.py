"""The two groups the GPU MSM serves, and its host side: affine window sums made points and folded.

Pure Python (no CuPy), so that it is tested where there is no GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

__all__ = ["G1", "G2", "Group", "Pt", "fold", "from_rows"]

Pt = TypeVar("Pt", G1Point, G2Point)


@dataclass(frozen=True)
class Group(Generic[Pt]):
    """What differs between G1 and G2 for the kernels: the field's width and the point type."""

    suffix: str
    """The kernels' suffix in ``msm.cu``."""
    field_limbs: int
    """32-bit limbs of one coordinate: 12 for Fp, 24 for Fp2 (c0 then c1)."""
    point: type[Pt]

    @property
    def xyzz_limbs(self) -> int:
        """Limbs of one XYZZ sum."""
        return 4 * self.field_limbs


G1: Group[G1Point] = Group("g1", 12, G1Point)
G2: Group[G2Point] = Group("g2", 24, G2Point)


def fold(sums: list[Pt], c: int, group: Group[Pt]) -> Pt:
    """sum_w 2^(c w) S_w by Horner's rule, the top window first."""
    step, acc = Scalar(1 << c), group.point.identity()
    for s in reversed(sums):
        acc = acc * step + s
    return acc


def from_rows(rows: np.ndarray, group: Group[Pt]) -> list[Pt]:
    """Points from rows of canonical affine limbs, x then y (``window_affine``'s); (0, 0) is the identity.

    No subgroup check: it cost 0.26 ms a point, more than the whole fold, and a wrong sum gives a
    proof that fails the engine's verification before COMPLETED.
    """
    make, identity = group.point.from_xy_bytes_unchecked_le, group.point.identity
    return [make(row.tobytes()) if row.any() else identity() for row in rows]
