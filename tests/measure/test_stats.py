"""The statistics the gates rest on: percentiles that know their sample size, intervals that cover."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import Samples


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
        low, high = stats.Rate().interval(proofs(20, seed)) or (0.0, 0.0)
        hits += low <= truth <= high
    assert 85 <= hits <= 100, f"{hits} of 100 intervals covered the true rate"


@pytest.mark.parametrize("estimator", [stats.Rate(), stats.Quantile(50)], ids=repr)
def test_too_few_or_identical_samples_give_no_interval_or_a_point(estimator):
    assert estimator.interval([10.0, 11.0]) is None
    point = float(estimator(np.array([10.0] * 3)))
    assert estimator.interval([10.0, 10.0, 10.0]) == (point, point)
    assert estimator.ratio([1.0, 2.0], [1.0, 2.0, 3.0]) == (None, None)
    assert estimator.ratio([5.0] * 4, [5.0] * 4) == ((1.0, 1.0), 1.0)


@pytest.mark.parametrize("estimator", [stats.Rate(), stats.Quantile(50)], ids=repr)
def test_the_ratio_interval_and_the_test_tell_a_shift_from_noise(estimator):
    before, same, slower = proofs(30, seed=1), proofs(30, seed=2), proofs(30, seed=3, mean_s=11.5)
    (low, high), p = estimator.ratio(before, same)
    assert low < 1.0 < high and p > 0.05, "one build against itself: a ratio of 1 is inside"
    (low, high), p = estimator.ratio(before, slower)
    worse = (0.95, 1.0) if isinstance(estimator, stats.Rate) else (1.0, 1.05)  # throughput falls, p50 rises
    assert (high < worse[0] if worse[0] < 1 else low > worse[1]) and p < 0.01, "15% slower proofs"


def test_the_rate_interval_is_students_t_over_few_windows_not_a_bootstrap():
    windows = [1.00, 1.04, 0.97, 1.02]  # seconds per proof of four windows
    low, high = stats.Rate().interval(windows) or (0.0, 0.0)
    mean, half = np.mean(windows), 3.182 * np.std(windows, ddof=1) / 2  # t(0.975, 3 df) = 3.182
    assert (low, high) == pytest.approx((3600 / (mean + half), 3600 / (mean - half)), rel=1e-3)
    (ratio_low, ratio_high), p = stats.Rate().ratio(windows, [w * 1.15 for w in windows])
    assert ratio_low < 1 / 1.15 < ratio_high and ratio_high < 0.95 and p < 0.01


def test_the_same_samples_always_give_the_same_interval():
    values = proofs(15, seed=7)
    assert stats.Quantile(90).interval(values) == stats.Quantile(90).interval(list(values))


def test_the_coefficient_of_variation():
    assert stats.cv([1.0]) is None
    assert stats.cv([9.0, 11.0]) == pytest.approx(np.std([9.0, 11.0], ddof=1) / 10.0)


def drifting(windows: int, waves: int, seed: int) -> Samples:
    """Waves alike within a window, windows apart: a host whose speed drifts over seconds."""
    rng = np.random.default_rng(seed)
    speed = np.repeat(1 + 0.05 * rng.standard_normal(windows), waves)
    wave_s = 0.1 * speed * (1 + 0.005 * rng.standard_normal(windows * waves))
    return Samples(
        wave_s=tuple(wave_s),
        wave_size=(1,) * (windows * waves),
        wave_window=tuple(np.repeat(np.arange(windows), waves)),
    )


def test_throughput_is_resampled_by_window_so_drift_between_windows_widens_its_interval():
    run = drifting(windows=8, waves=40, seed=3)
    per_window = run.series("window_s_per_proof")
    assert per_window == pytest.approx([float(np.mean(run.wave_s[i * 40 : (i + 1) * 40])) for i in range(8)])
    per_wave = [s / n for s, n in zip(run.wave_s, run.wave_size, strict=True)]
    over_waves = stats.half_width_pct(per_wave, stats.Rate())
    over_windows = stats.half_width_pct(per_window, stats.Rate())
    assert over_waves is not None and over_windows is not None
    assert over_windows > 3 * over_waves, "320 alike waves must not pass for 320 independent ones"
    assert Samples(wave_s=(1.0,), wave_size=(1,)).series("window_s_per_proof") == []  # saved before windows


def test_pooled_runs_keep_each_runs_windows_apart():
    a, b = drifting(windows=3, waves=2, seed=1), drifting(windows=2, waves=2, seed=2)
    pooled = Samples.pooled([a, b])
    assert pooled.wave_window == (0, 0, 1, 1, 2, 2, 3, 3, 4, 4)
    assert pooled.series("window_s_per_proof") == a.series("window_s_per_proof") + b.series(
        "window_s_per_proof"
    )
    assert Samples.pooled([a, Samples(wave_s=(1.0,), wave_size=(1,))]).wave_window == ()


def test_a_rate_whose_windows_vary_past_zero_seconds_has_no_interval_rather_than_a_negative_one():
    """Ten windows, one 25 times the rest (a first proof's stall): the mean's t-interval goes below 0 s."""
    windows = [0.013] * 9 + [0.33]
    assert stats.Rate().interval(windows) is None
    assert stats.half_width_pct(windows, stats.Rate()) is None
    assert stats.Rate().interval([0.013, 0.014] * 5) is not None, "an ordinary spread keeps its interval"


def test_drift_finds_a_trend_and_not_noise():
    rng = random.Random(1)  # noise of a 5% CV (a seed whose 30 draws do not drift by chance: 1 in 20 does)
    steady = stats.drift([100 + rng.gauss(0, 5) for _ in range(30)])
    assert steady is not None and not steady.drifting()
    rising = stats.drift([30, 32, 35, 37, 40, 42, 44, 47])  # the drift from 30 s to 47 s
    assert rising is not None and rising.drifting() and 40 < rising.change_pct < 50
    few = stats.drift([60, 75, 70])
    assert few is not None and not few.drifting() and not few.within(10.0), "three proofs show nothing"
    assert stats.drift([1.0, 2.0]) is None
