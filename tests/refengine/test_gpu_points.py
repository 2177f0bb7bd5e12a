"""The GPU MSM's host side, without a GPU: XYZZ window sums made affine in G1 and G2, and the fold.

The kernels hand back (X, Y, ZZ, ZZZ) with x = X/ZZ and y = Y/ZZZ; here they are built from known
points and random non-zero z (ZZ = z^2, ZZZ = z^3), in Fp or Fp2, and must come back as those points.
"""

from __future__ import annotations

import random
import secrets
from typing import Any

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.gpu.points import G1, G2, Group, P, affine_all, fold


def _mul(a: list[int], b: list[int]) -> list[int]:
    """Product in Fp (one component) or Fp2 (two, u^2 = -1)."""
    if len(a) == 1:
        return [a[0] * b[0] % P]
    return [(a[0] * b[0] - a[1] * b[1]) % P, (a[0] * b[1] + a[1] * b[0]) % P]


def _coords(point: G1Point | G2Point, width: int) -> tuple[list[int], list[int]]:
    raw = point.to_xy_bytes_le()
    comps = [int.from_bytes(raw[k : k + 48], "little") for k in range(0, len(raw), 48)]
    return comps[:width], comps[width:]


def _limbs(*coords: list[int]) -> np.ndarray:
    raw = b"".join(c.to_bytes(48, "little") for coord in coords for c in coord)
    return np.frombuffer(raw, dtype="<u4")


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_xyzz_rows_come_back_as_the_affine_points(group: Group[Any]) -> None:
    seed = secrets.randbits(32)
    rnd = random.Random(seed)
    width = group.field_limbs // 12
    gen = group.point()
    points = [gen * Scalar(rnd.randrange(1, R)) for _ in range(5)] + [gen, -gen]
    rows = []
    for p in points:
        x, y = _coords(p, width)
        z = [rnd.randrange(1, P) for _ in range(width)]
        zz = _mul(z, z)
        zzz = _mul(zz, z)
        rows.append(_limbs(_mul(x, zz), _mul(y, zzz), zz, zzz))
    identity = _limbs([0] * width, [1] + [0] * (width - 1), [0] * width, [0] * width)
    got = affine_all(np.stack([*rows[:3], identity, *rows[3:]]), group)
    assert got == [*points[:3], group.point.identity(), *points[3:]], f"seed {seed}"


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
@pytest.mark.parametrize("c", [4, 13, 16])
def test_fold_weighs_window_w_by_two_to_the_cw(group: Group[Any], c: int) -> None:
    seed = secrets.randbits(32)
    rnd = random.Random(seed)
    windows = -(-256 // c)
    sums = [group.point() * Scalar(rnd.randrange(R)) for _ in range(windows)]
    sums[rnd.randrange(windows)] = group.point.identity()
    want = group.point.identity()
    for w, s in enumerate(sums):
        want = want + s * Scalar(pow(2, c * w, R))
    assert fold(sums, c, group) == want, f"seed {seed}"
