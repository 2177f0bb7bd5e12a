"""The GPU MSM's host side, without a GPU: affine window sums made points in G1 and G2, and the fold.

The kernels' conversion itself is tested in ``test_gpu_kernels_on_host`` and ``tests/gpu``.
"""

from __future__ import annotations

import random
import secrets
from typing import Any

import numpy as np
import pytest
from py_arkworks_bls12381 import Scalar

from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.gpu.points import G1, G2, Group, fold, from_rows


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_affine_rows_come_back_as_the_points_and_zero_rows_as_the_identity(group: Group[Any]) -> None:
    seed = secrets.randbits(32)
    rnd = random.Random(seed)
    gen = group.point()
    points = [gen * Scalar(rnd.randrange(1, R)) for _ in range(4)] + [gen, -gen]
    rows = [np.frombuffer(p.to_xy_bytes_le(), dtype="<u4") for p in points]
    zero = np.zeros(2 * group.field_limbs, dtype="<u4")
    got = from_rows(np.stack([*rows[:2], zero, *rows[2:], zero]), group)
    assert got == [*points[:2], group.point.identity(), *points[2:], group.point.identity()], f"seed {seed}"


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
