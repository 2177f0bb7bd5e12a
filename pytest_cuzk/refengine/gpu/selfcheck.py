"""The GPU's MSMs checked against py-arkworks when the GPU prover opens, before any proof depends on them.

NVRTC compiles the kernels on the host they run on, with that host's driver and CUDA: a
miscompile or a device fault there would fail every proof at the engine's own verification.
A few dozen points in each group, with the edge cases (a zero scalar, r - 1, the identity, a
repeated base), take milliseconds; a disagreement sends the engine to the CPU prover with the
reason in its log, and the identity says ``prover=cpu``.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from py_arkworks_bls12381 import Scalar

from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.gpu.ntt import fr_limbs
from pytest_cuzk.refengine.gpu.points import G1, G2, Group

__all__ = ["CHECK_POINTS", "MsmDevice", "disagreement"]

CHECK_POINTS = 64


class MsmDevice(Protocol):
    """What the check needs of ``msm.GpuMsm``."""

    def upload(self, points: Any, group: Any) -> Any: ...

    def msm(self, bases: Any, scalars: Any) -> Any: ...


def _case(group: Group[Any], rnd: random.Random) -> tuple[list[Any], list[int]]:
    g = group.point()
    points = [g * Scalar(rnd.randrange(1, R)) for _ in range(CHECK_POINTS)]
    points[1], points[2], points[3] = group.point.identity(), points[0], -points[0]
    scalars = [rnd.randrange(R) for _ in points]
    scalars[4], scalars[5] = 0, R - 1
    return points, scalars


def disagreement(device: MsmDevice, seed: int = 0) -> str:
    """Empty when the device's G1 and G2 MSMs equal py-arkworks'; else which group differed and how."""
    rnd = random.Random(seed)
    for group in (G1, G2):
        points, ks = _case(group, rnd)
        got = device.msm(device.upload(points, group), fr_limbs(ks))
        want = group.point.multiexp_unchecked(points, [Scalar(k) for k in ks])
        if got != want:
            name = group.suffix.upper()
            return f"the GPU's {name} MSM of {len(points)} points disagreed with py-arkworks"
    return ""
