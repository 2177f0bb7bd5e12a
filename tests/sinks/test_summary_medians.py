"""The summary's medians: one format whatever the unit, each interval in its figure's own unit."""

from __future__ import annotations

import re

from pytest_cuzk.measure.figures import Figures, Samples
from pytest_cuzk.sinks.terminal import interval_line, median_interval, stage_line

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


def test_a_proofs_gpu_and_synthesis_medians_say_they_are_summed_over_partitions_and_a_partitions_do_not():
    gpu = (7639, 7700, 7780, 7800, 8230, 7760, 7790, 7810, 7650)  # ten partitions a proof, each ~780 ms
    samples = Samples(
        latency_s=SECONDS, gpu_compute_ms=gpu, synthesis_ms=(500,) * 9, queue_wait_ms=(3,) * 9,
        partition_gpu_ms=tuple(ms // 10 for ms in gpu for _ in range(10)),
    )  # fmt: skip
    figures = Figures(
        "test_prove[porep-batch1-j1]", "local", "porep", 1, 1, 9, 0, 12.0, 2700.0, 1.3, 1.5, 1.6,
        samples=samples, gpu_p50_ms=7780.0, synthesis_p50_ms=500.0, queue_wait_p50_ms=3.0,
    )  # fmt: skip
    stages = stage_line(figures)
    assert stages is not None and re.fullmatch(
        r"  per proof, median \(95% CI\): GPU \(summed over partitions\) 7780\.0 ms "
        r"\(7\d{3}\.\d to 7\d{3}\.\d ms\), synth \(summed\) 500\.0 ms \(500\.0 to 500\.0 ms\), "
        r"queue 3\.0 ms \(3\.0 to 3\.0 ms\)",
        stages,
    ), stages
    intervals = interval_line(figures)
    partition = r"; GPU per partition 0\.78 s \(0\.7\d to 0\.\d\d s\) over 90 partitions;"
    assert re.search(partition, intervals), intervals
    assert "median latency 1.30 s (" in intervals and "summed" not in intervals
