"""E-divisive means with the t-test on synthetic series with the spread of real hosts' runs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pytest_cuzk.perf.edivisive import _candidate, change_points


def noisy(n: int, cv: float, seed: int, steps: dict[int, float] | None = None) -> np.ndarray:
    """``n`` runs' log throughput around 1000/h with ``cv`` spread; ``steps``: from run i on, times f."""
    rng = np.random.default_rng(seed)
    level = np.ones(n)
    for at, factor in (steps or {}).items():
        level[at:] *= factor
    return np.log(1000 * level * (1 + cv * rng.standard_normal(n)))


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
    tau, q = _candidate(z, 0, 16, min_runs) or (None, None)
    assert (tau, q) == (best[1], pytest.approx(best[0]))
