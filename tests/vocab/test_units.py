"""Counts and sizes as people write them."""

from __future__ import annotations

from pytest_cuzk.vocab.units import GIB, MIB, format_bytes, plural


def test_a_count_takes_its_noun_in_the_singular_only_for_one():
    assert [plural(n, "window") for n in (0, 1, 2)] == ["0 windows", "1 window", "2 windows"]
    assert plural(1, "cuzk test") == "1 cuzk test"
    assert plural(3, "wpost proof") == "3 wpost proofs"
    assert plural(2, "analysis", "analyses") == "2 analyses"


def test_sizes_keep_a_figure_at_every_scale():
    assert format_bytes(None) == "n/a"
    assert format_bytes(0) == "0 MiB"
    assert format_bytes(340 * 1024) == "340 KiB", "a small budget is not 0 MiB"
    assert format_bytes(512 * MIB) == "512 MiB"
    assert format_bytes(1.234 * GIB) == "1.23 GiB"
    assert format_bytes(180 * GIB) == "180.0 GiB"
