"""The order an A/B case measures its two builds in: seeded, and in ABBA couples."""

from __future__ import annotations

from itertools import islice

from pytest_cuzk.run.ab import pair_orders


def test_the_same_seed_gives_the_same_order_and_the_order_is_in_abba_couples():
    first = list(islice(pair_orders(7), 40))
    assert first == list(islice(pair_orders(7), 40))
    assert first != list(islice(pair_orders(8), 40))
    assert all(first[i] == first[i + 1][::-1] for i in range(0, 40, 2)), first
    assert {"BC", "CB"} == {first[i] for i in range(0, 40, 2)}, "either build may open a couple"
