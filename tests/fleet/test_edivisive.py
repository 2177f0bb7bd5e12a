"""E-divisive means with the t-test on synthetic series with the spread of real hosts' runs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from pytest_cuzk.fleet import edivisive
from pytest_cuzk.fleet.edivisive import MAX_RHO, _candidate, _lag1, _test, change_points


def noisy(n: int, cv: float, seed: int, steps: dict[int, float] | None = None) -> np.ndarray:
    """``n`` runs' log throughput around 1000/h with ``cv`` spread; ``steps``: from run i on, times f."""
    rng = np.random.default_rng(seed)
    level = np.ones(n)
    for at, factor in (steps or {}).items():
        level[at:] *= factor
    return np.log(1000 * level * (1 + cv * rng.standard_normal(n)))


def drifting(n: int, cv: float, phi: float, seed: int, steps: dict[int, float] | None = None) -> np.ndarray:
    """As ``noisy``, but each run's deviation is ``phi`` of its predecessor's plus new noise (AR(1))."""
    rng = np.random.default_rng(seed)
    deviation = np.empty(n)
    deviation[0] = cv * rng.standard_normal()
    for i in range(1, n):
        deviation[i] = phi * deviation[i - 1] + cv * np.sqrt(1 - phi**2) * rng.standard_normal()
    level = np.ones(n)
    for at, factor in (steps or {}).items():
        level[at:] *= factor
    return np.log(1000 * level * (1 + deviation))


@pytest.mark.parametrize("cv", [0.01, 0.02, 0.03])
@pytest.mark.parametrize("seed", range(3))
def test_a_planted_10pct_step_among_30_runs_is_found_at_its_run(cv: float, seed: int) -> None:
    found = change_points(noisy(30, cv, seed, {17: 0.9}))
    assert [s.index for s in found] == [17]
    (split,) = found
    assert (split.start, split.stop) == (0, 30)
    low, high = split.interval
    assert low <= split.shift <= high
    assert low < math.log(0.9) < high  # the planted ratio is inside the 95% interval
    assert split.p < 0.001


@pytest.mark.parametrize("cv", [0.01, 0.02, 0.03])
@pytest.mark.parametrize("seed", range(3))
def test_30_runs_without_a_step_show_no_change(cv: float, seed: int) -> None:
    assert change_points(noisy(30, cv, 100 + seed)) == []


def test_two_changes_are_each_tested_between_their_neighbours() -> None:
    found = change_points(noisy(60, 0.02, 7, {20: 0.85, 40: 1.25}))
    assert [(s.start, s.index, s.stop) for s in found] == [(0, 20, 40), (20, 40, 60)]
    assert found[0].shift < 0 < found[1].shift


def test_a_series_longer_than_a_window_finds_a_step_in_each_window() -> None:
    x = noisy(130, 0.01, 3, {30: 0.9, 100: 1.1})
    assert [s.index for s in change_points(x, window=50)] == [30, 100]


def test_one_odd_run_at_the_end_is_no_change_while_min_runs_asks_for_more() -> None:
    x = noisy(30, 0.01, 5, {29: 0.7})
    assert change_points(x) == []
    assert [s.index for s in change_points(x, min_runs=1)] == [29]


def test_constant_series_and_a_step_between_constants() -> None:
    assert change_points([5.0] * 20) == []
    (split,) = change_points([5.0] * 10 + [6.0] * 10)
    assert (split.index, split.shift, split.p) == (10, 1.0, 0.0)
    assert change_points([]) == change_points([1.0]) == []


def _q_by_definition(z: np.ndarray, tau: int, kappa: int) -> float:
    """Matteson & James's Q̂ written out: (nm/(n+m)) times the energy distance of X and Y."""
    x, y = z[:tau], z[tau:kappa]
    n, m = len(x), len(y)
    between = np.abs(x[:, None] - y[None, :]).sum() * 2 / (n * m)
    within_x = sum(abs(a - b) for a, b in itertools.combinations(x, 2)) / math.comb(n, 2) if n > 1 else 0.0
    within_y = sum(abs(a - b) for a, b in itertools.combinations(y, 2)) / math.comb(m, 2) if m > 1 else 0.0
    return float(n * m / (n + m) * (between - within_x - within_y))


@pytest.mark.parametrize("min_runs", [1, 3])
def test_the_candidate_maximises_q_as_defined(min_runs: int) -> None:
    z = noisy(16, 0.05, 11, {9: 0.8})
    best = max(
        (_q_by_definition(z, tau, kappa), tau)
        for tau in range(min_runs, 17 - min_runs)
        for kappa in range(tau + min_runs, 17)
    )
    found = _candidate(z, 0, 16, min_runs)
    assert found is not None
    assert found[0] == best[1] and found[1] == pytest.approx(best[0])


def test_without_drift_the_test_is_students() -> None:
    x = noisy(30, 0.02, 21, {12: 0.9})
    split = _test(x, 0, 12, 30, 0.0)
    student = sps.ttest_ind(x[12:], x[:12], equal_var=True)
    ci = student.confidence_interval(0.95)
    assert split.p == pytest.approx(student.pvalue)
    assert split.interval == pytest.approx((ci.low, ci.high))
    assert split.shift == pytest.approx(x[12:].mean() - x[:12].mean())


def test_drift_counts_the_runs_as_fewer() -> None:
    x = noisy(30, 0.02, 21, {12: 0.95})
    independent, drifting_ = _test(x, 0, 12, 30, 0.0), _test(x, 0, 12, 30, 0.5)
    assert drifting_.shift == independent.shift
    assert drifting_.p > 10 * independent.p
    width = [s.interval[1] - s.interval[0] for s in (independent, drifting_)]
    assert width[1] > math.sqrt(3) * width[0]  # the means' variance three times, fewer degrees of freedom


def test_lag1_is_the_drift_about_each_segments_mean() -> None:
    x = drifting(3000, 0.02, 0.5, 4, {1500: 0.9})
    assert 0.5 < _lag1(x, [0, 1500, 3000]) < 0.56  # the estimate plus its standard error, about 0.016
    assert _lag1(x, [0, 3000]) == MAX_RHO  # the step left in reads as drift, as far as the bound allows
    assert 0 < _lag1(noisy(3000, 0.02, 4), [0, 3000]) < 0.05
    assert _lag1(np.full(10, 3.0), [0, 10]) == 0.0


def test_runs_drifting_together_are_not_taken_for_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    series = [drifting(30, 0.02, 0.5, 200 + seed) for seed in range(60)]
    found = sum(bool(change_points(x)) for x in series)
    monkeypatch.setattr(edivisive, "_lag1", lambda x, bounds: 0.0)  # Otava's test: runs independent
    independent = sum(bool(change_points(x)) for x in series)
    assert found <= 3 < 8 <= independent


def test_a_planted_15pct_step_among_drifting_runs_is_found_at_its_run() -> None:
    found = [change_points(drifting(30, 0.02, 0.5, 300 + seed, {15: 0.85})) for seed in range(20)]
    assert sum([s.index for s in f] == [15] for f in found) >= 17  # drifting runs are worth fewer: not all
