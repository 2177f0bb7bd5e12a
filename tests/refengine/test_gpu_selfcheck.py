"""The GPU prover's opening check, without a GPU: a device whose MSMs are right passes, a wrong one is named.

The stand-in devices compute with py-arkworks from the very limb arrays the kernels would get,
so the check's inputs (edge scalars, the identity, a base and its negation) are exercised too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from py_arkworks_bls12381 import Scalar

from pytest_cuzk.refengine.gpu.points import G2
from pytest_cuzk.refengine.gpu.selfcheck import CHECK_POINTS, disagreement


class ArkworksDevice:
    """Uploads keep the points; an MSM reads its scalars back from the (n, 8) limb array."""

    def __init__(self, broken: Any = None) -> None:
        self.broken = broken
        self.calls: list[tuple[str, int]] = []

    def upload(self, points: list[Any], group: Any) -> tuple[list[Any], Any]:
        return points, group

    def msm(self, bases: tuple[list[Any], Any], scalars: np.ndarray) -> Any:
        points, group = bases
        self.calls.append((group.suffix, len(points)))
        ks = [int.from_bytes(row.astype("<u4").tobytes(), "little") for row in scalars]
        total = group.point.multiexp_unchecked(points, [Scalar(k) for k in ks])
        return group.point.identity() if group is self.broken else total


def test_a_device_that_agrees_passes_both_groups() -> None:
    device = ArkworksDevice()
    assert disagreement(device) == ""
    assert device.calls == [("g1", CHECK_POINTS), ("g2", CHECK_POINTS)]


def test_a_wrong_g2_msm_is_named() -> None:
    assert disagreement(ArkworksDevice(broken=G2)) == (
        f"the GPU's G2 MSM of {CHECK_POINTS} points disagreed with py-arkworks"
    )
