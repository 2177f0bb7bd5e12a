"""The two groups the GPU MSM serves, and its host side: window sums made affine and folded.

Pure Python (no CuPy), so that the Fp2 arithmetic here is tested where there is no GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from ..field import batch_inverse

__all__ = ["G1", "G2", "Group", "P", "Pt", "affine_all", "fold"]

P = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
"""The base field modulus of BLS12-381."""

Pt = TypeVar("Pt", G1Point, G2Point)


@dataclass(frozen=True)
class Group(Generic[Pt]):
    """What differs between G1 and G2 for the kernels: the field's width and the point type."""

    suffix: str
    """The kernels' suffix in ``msm.cu``."""
    field_limbs: int
    """32-bit limbs of one coordinate: 12 for Fp, 24 for Fp2 (c0 then c1)."""
    point: type[Pt]
    affine: Callable[[int, int], Pt]
    """The point (x, y) from the coordinates' limbs as integers (c0 + c1 * 2^384 in G2)."""

    @property
    def xyzz_limbs(self) -> int:
        """Limbs of one XYZZ sum."""
        return 4 * self.field_limbs


def _g1_affine(x: int, y: int) -> G1Point:
    return G1Point.from_xy_bytes_unchecked_le(x.to_bytes(48, "little") + y.to_bytes(48, "little"))


def _g2_affine(x: int, y: int) -> G2Point:
    return G2Point.from_xy_bytes_unchecked_le(x.to_bytes(96, "little") + y.to_bytes(96, "little"))


G1: Group[G1Point] = Group("g1", 12, G1Point, _g1_affine)
G2: Group[G2Point] = Group("g2", 24, G2Point, _g2_affine)


def fold(sums: list[Pt], c: int, group: Group[Pt]) -> Pt:
    """sum_w 2^(c w) S_w by Horner's rule, the top window first."""
    step, acc = Scalar(1 << c), group.point.identity()
    for s in reversed(sums):
        acc = acc * step + s
    return acc


def affine_all(xyzz: np.ndarray, group: Group[Pt]) -> list[Pt]:
    """Points from rows of canonical XYZZ limbs (x = X/ZZ, y = Y/ZZZ; ZZ = 0 is the identity).

    One inversion for all rows (Montgomery's trick; in Fp2 through the norm, 1/a = conj(a) / (a0^2 + a1^2)),
    and no subgroup check: it cost 0.26 ms a point, more than the whole fold, and a wrong sum
    gives a proof that fails the engine's verification before COMPLETED.
    """
    w = group.field_limbs
    rows = [[_coords(row[w * i : w * i + w]) for i in range(4)] for row in xyzz]
    finite = [r for r in rows if any(r[2])]
    norms = batch_inverse([_norm(z) for r in finite for z in (r[2], r[3])], P)
    inverses = iter(norms)
    out = []
    for x, y, zz, zzz in rows:
        if not any(zz):
            out.append(group.point.identity())
            continue
        ax = _times_inverse(x, zz, next(inverses))
        ay = _times_inverse(y, zzz, next(inverses))
        out.append(group.affine(_packed(ax), _packed(ay)))
    return out


def _coords(limbs: np.ndarray) -> list[int]:
    """A coordinate's components (one in Fp, c0 and c1 in Fp2) as integers."""
    return [int.from_bytes(limbs[k : k + 12].tobytes(), "little") for k in range(0, len(limbs), 12)]


def _norm(d: list[int]) -> int:
    """D itself in Fp; d0^2 + d1^2 in Fp2, which is in Fp and non-zero when d is."""
    return d[0] if len(d) == 1 else (d[0] * d[0] + d[1] * d[1]) % P


def _times_inverse(a: list[int], d: list[int], inv_norm: int) -> list[int]:
    """The quotient a / d in Fp or Fp2 (u^2 = -1), given 1 / norm(d)."""
    if len(a) == 1:
        return [a[0] * inv_norm % P]
    d0, d1 = d[0] * inv_norm % P, -d[1] * inv_norm % P  # 1/d = conj(d) / norm(d)
    return [(a[0] * d0 - a[1] * d1) % P, (a[0] * d1 + a[1] * d0) % P]


def _packed(c: list[int]) -> int:
    """A coordinate as one little-endian integer: c0, then c1 in the next 48 bytes."""
    return sum(v << (384 * k) for k, v in enumerate(c))
