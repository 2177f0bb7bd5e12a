"""The statistics the gates rest on: percentiles that know their sample size, intervals that cover."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_cuzk import stats


def proofs(n: int, seed: int, mean_s: float = 10.0, spread: float = 0.15) -> list[float]:
    """Skewed proof times, as real ones are: log-normal around ``mean_s``."""
    return list(mean_s * np.random.default_rng(seed).lognormal(0.0, spread, n))


def test_a_percentile_needs_enough_samples_to_be_more_than_the_extreme():
    assert [stats.percentile_floor(q) for q in (50, 90, 99)] == [1, 10, 100]
    values = proofs(9, seed=1)
    assert stats.percentile(values, 90) == (None, "needs at least 10 proofs, 9 measured")
    assert stats.percentile([], 50) == (None, "needs at least 1 proofs, none measured")
    value, why = stats.percentile([*values, 11.0], 90)
    assert why is None and value == pytest.approx(np.percentile([*values, 11.0], 90))


def test_the_interval_of_the_throughput_covers_the_truth_about_95_in_100_times():
    truth = 3600 / np.mean(10.0 * np.random.default_rng(0).lognormal(0.0, 0.15, 1_000_000))
    hits = 0
    for seed in range(100):
        low, high = stats.ci(proofs(20, seed), stats.per_hour) or (0.0, 0.0)
        hits += low <= truth <= high
    assert 85 <= hits <= 100, f"{hits} of 100 intervals covered the true rate"


def test_too_few_or_identical_samples_give_no_interval_or_a_point():
    assert stats.ci([10.0, 11.0], stats.per_hour) is None
    assert stats.ci([10.0, 10.0, 10.0], stats.per_hour) == (360.0, 360.0)
    assert stats.ratio_ci([1.0, 2.0], [1.0, 2.0, 3.0], stats.per_hour) is None
    assert stats.mann_whitney_p([5.0] * 4, [5.0] * 4) == 1.0


def test_the_ratio_interval_and_the_rank_test_tell_a_shift_from_noise():
    before, same, slower = proofs(30, seed=1), proofs(30, seed=2), proofs(30, seed=3, mean_s=11.5)
    low, high = stats.ratio_ci(before, same, stats.per_hour) or (0.0, 0.0)
    assert low < 1.0 < high, "one build against itself: a ratio of 1 is inside"
    assert (stats.mann_whitney_p(before, same) or 0) > 0.05
    low, high = stats.ratio_ci(before, slower, stats.per_hour) or (1.0, 1.0)
    assert high < 0.95, "15% slower proofs: the whole interval is below 95% of the throughput"
    assert (stats.mann_whitney_p(before, slower) or 1) < 0.01
    p50_low, p50_high = stats.ratio_ci(before, slower, stats.quantile(50)) or (0.0, 0.0)
    assert 1.0 < p50_low < p50_high


def test_the_same_samples_always_give_the_same_interval():
    values = proofs(15, seed=7)
    assert stats.ci(values, stats.per_hour) == stats.ci(list(values), stats.per_hour)


def test_the_coefficient_of_variation():
    assert stats.cv([1.0]) is None
    assert stats.cv([9.0, 11.0]) == pytest.approx(np.std([9.0, 11.0], ddof=1) / 10.0)
