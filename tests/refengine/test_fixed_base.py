"""The setup's fixed-base tables give the points py-arkworks' own multiplication gives."""

from __future__ import annotations

import random

import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.fixed_base import FixedBase

EDGES = [0, 1, 2, 1023, 1024, 1025, (1 << 250) + 7, R - 1, R - 2]


@pytest.mark.parametrize("group", [G1Point, G2Point], ids=["g1", "g2"])
@pytest.mark.parametrize("window_bits", [1, 7, 10])
def test_multiples_match_double_and_add(group, window_bits):
    base = group() * Scalar(987654321)  # not the generator: the table works from any base
    table = FixedBase(base, group.identity(), window_bits=window_bits)
    ks = EDGES + [random.Random(window_bits).randrange(R) for _ in range(8)]
    assert table.muls(ks) == [base * Scalar(k) for k in ks]


def test_a_scalar_beyond_the_table_is_refused():
    table = FixedBase(G1Point(), G1Point.identity(), bits=16)
    assert table.mul((1 << 16) - 1) == G1Point() * Scalar((1 << 16) - 1)
    with pytest.raises(ValueError, match=r"\[0, 2\^16\)"):
        table.mul(1 << 16)
    with pytest.raises(ValueError):
        table.mul(-1)
