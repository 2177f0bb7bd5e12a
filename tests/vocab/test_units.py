"""Counts and sizes as people write them."""

from __future__ import annotations

from pytest_cuzk.vocab.units import plural


def test_a_count_takes_its_noun_in_the_singular_only_for_one():
    assert [plural(n, "window") for n in (0, 1, 2)] == ["0 windows", "1 window", "2 windows"]
    assert plural(1, "cuzk test") == "1 cuzk test"
    assert plural(3, "wpost proof") == "3 wpost proofs"
    assert plural(2, "analysis", "analyses") == "2 analyses"
