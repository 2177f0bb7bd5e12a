"""The summary's medians: one format whatever the unit, each interval in its figure's own unit."""

from __future__ import annotations

import re

from pytest_cuzk.sinks.terminal import median_interval

SECONDS = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.15, 1.45]


def test_a_median_reads_alike_in_seconds_and_in_milliseconds():
    in_s = median_interval(SECONDS, "{:.2f}".format, " s")
    in_ms = median_interval([s * 1000 for s in SECONDS], "{:.1f}".format, " ms")
    found_s = re.fullmatch(r"1\.30 s \((\d\.\d\d) to (\d\.\d\d) s\)", in_s)
    found_ms = re.fullmatch(r"1300\.0 ms \((\d+\.\d) to (\d+\.\d) ms\)", in_ms)
    assert found_s and found_ms, (in_s, in_ms)
    for s, ms in zip(found_s.groups(), found_ms.groups(), strict=True):
        assert abs(float(s) - float(ms) / 1000) <= 0.005, (in_s, in_ms)
    assert float(found_s[1]) < 1.3 < float(found_s[2])


def test_the_recorded_figure_is_the_median_shown_and_too_few_values_say_they_have_no_interval():
    assert median_interval(SECONDS, "{:.2f}".format, " s", median=1.25).startswith("1.25 s (")
    assert median_interval([2.0], "{:.1f}".format, " ms") == "2.0 ms (no interval)"
    assert median_interval([3.0] * 9, "{:.1f}".format, " ms") == "3.0 ms (3.0 to 3.0 ms)"
