"""Change points in a series of runs: E-divisive means with a Student's t significance test.

The method of Apache Otava (formerly DataStax's Hunter; Fleming et al., "Hunter: Using Change
Point Detection to Hunt for Performance Regressions", ICPE 2023), which MongoDB's CI also runs:

- split: in windows of ``WINDOW`` runs (half-overlapping), E-divisive means (Matteson & James
  2014) proposes the split of a segment that best separates the two sides' distributions (the
  largest energy statistic Q̂), and Student's t-test between the two sides keeps it while p is
  within a first-pass threshold ten times looser than the final one (Otava's ``weak`` points);
- merge: the weakest point (highest p, each tested between its neighbouring points) is dropped
  until every one left is within the threshold.

Written here on numpy and scipy because neither maintained package fits beside this one:
``apache-otava`` pins numpy to 2.2 exactly and scipy below 1.17 and brings BigQuery, Slack and
PostgreSQL clients; MongoDB's ``signal-processing-algorithms`` installs only on Python 3.11 with
numpy below 2; ``ruptures`` has no significance test (its searches need a penalty or the number
of changes). The series are short (runs of one host), so Q̂ comes from a distance matrix's 2-D
prefix sums instead of Otava's incremental ones.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from pytest_cuzk.measure.stats import CONFIDENCE

__all__ = ["MAX_P", "MIN_RUNS", "WINDOW", "Split", "change_points"]

WINDOW = 50  # Otava's default window: long enough for small shifts, short enough that one big one hides none
MAX_P = 0.001  # Otava's default threshold; tests/benchmarks/test_changes_bench.py measures what it costs
MIN_RUNS = 3  # runs each side of a change at the least: one odd run is the host's drift, not a build


@dataclass(frozen=True)
class Split:
    """A change before point ``index``, tested between the change points either side of it.

    ``shift`` is the mean of the logarithms after less the mean before, ``interval`` its 95%
    interval: ``exp`` of them is the ratio of the two sides' geometric means.
    """

    index: int
    start: int  # the segment before it begins here
    stop: int  # the segment after it ends before here
    shift: float
    interval: tuple[float, float]
    p: float


def _test(x: np.ndarray, start: int, index: int, stop: int) -> Split:
    """Student's t-test (pooled variance, as Otava's) between ``x[start:index]`` and ``x[index:stop]``."""
    before, after = x[start:index], x[index:stop]
    if np.ptp(x[start:stop]) == 0:  # one value throughout (whose means may differ in the last bit)
        return Split(index, start, stop, 0.0, (0.0, 0.0), 1.0)
    shift = float(after.mean() - before.mean())
    if np.ptp(before) == 0 and np.ptp(after) == 0:
        return Split(index, start, stop, shift, (shift, shift), 0.0)
    test = sps.ttest_ind(after, before, equal_var=True)
    ci = test.confidence_interval(CONFIDENCE)
    p = float(test.pvalue)
    return Split(index, start, stop, shift, (float(ci.low), float(ci.high)), 1.0 if math.isnan(p) else p)


def _candidate(x: np.ndarray, start: int, stop: int, min_runs: int) -> tuple[int, float] | None:
    """The split ``tau`` of ``x[start:stop]`` with the largest Q̂ over every end ``kappa``, and that Q̂.

    Q̂(X, Y) = 2/(n+m) Σ|X_i - Y_j| - 2m/((n+m)(n-1)) Σ_{i<k}|X_i - X_k| - 2n/((n+m)(m-1)) Σ_{j<k}|Y_j - Y_k|
    for X = x[start:tau] (n runs) and Y = x[tau:kappa] (m runs), each at least ``min_runs``.
    """
    z = x[start:stop]
    size = len(z)
    if size < 2 * min_runs:
        return None
    dist = np.abs(z[:, None] - z[None, :])
    cum = np.zeros((size + 1, size + 1))
    cum[1:, 1:] = dist.cumsum(0).cumsum(1)

    def block(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
        return cum[b, d] - cum[a, d] - cum[b, c] + cum[a, c]  # type: ignore[no-any-return]

    tau = np.arange(min_runs, size - min_runs + 1)[:, None]
    kappa = np.arange(2 * min_runs, size + 1)[None, :]
    n, m = tau.astype(float), (kappa - tau).astype(float)
    zero = np.zeros_like(tau)
    between = block(zero, tau, tau, kappa)
    within_x, within_y = block(zero, tau, zero, tau) / 2, block(tau, kappa, tau, kappa) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (
            2 * between / (n + m)
            - np.where(n > 1, 2 * m * within_x / ((n + m) * (n - 1)), 0.0)
            - np.where(m > 1, 2 * n * within_y / ((n + m) * (m - 1)), 0.0)
        )
    q = np.where(m >= min_runs, q, -np.inf)
    i, j = np.unravel_index(np.argmax(q), q.shape)
    return start + int(tau[i, 0]), float(q[i, j])


def _divide(x: np.ndarray, start: int, stop: int, max_p: float, min_runs: int) -> list[int]:
    """E-divisive over ``x[start:stop]``: split where Q̂ is largest while the t-test keeps the split."""
    points: list[int] = []
    while True:
        bounds = [start, *points, stop]
        found = [
            (c[1], c[0], a, b)
            for a, b in itertools.pairwise(bounds)
            if (c := _candidate(x, a, b, min_runs)) is not None
        ]
        if not found:
            return points
        _, tau, a, b = max(found)
        if _test(x, a, tau, b).p > max_p:
            return points
        points = sorted([*points, tau])


def _tested(x: np.ndarray, points: list[int]) -> list[Split]:
    bounds = [0, *points, len(x)]
    return [_test(x, bounds[i], bounds[i + 1], bounds[i + 2]) for i in range(len(points))]


def change_points(
    values: list[float] | np.ndarray, max_p: float = MAX_P, min_runs: int = MIN_RUNS, window: int = WINDOW
) -> list[Split]:
    """The changes in ``values`` (in order), each significant at ``max_p`` between its neighbours."""
    x = np.asarray(values, dtype=float)
    weak: set[int] = set()
    first_pass = max_p * 10 if max_p < 0.05 else max_p * 2 if max_p < 0.5 else max_p  # Otava's
    start, step = 0, max(window // 2, 1)
    while start < len(x):
        found = _divide(x, start, min(start + window, len(x)), first_pass, min_runs)
        weak |= set(found)
        start = max(found[-1] if found else 0, start + step)
    points = sorted(weak)
    while points:  # windows overlap: a point found in two may sit a run or two from itself
        splits = _tested(x, points)
        short = [min(s.index - s.start, s.stop - s.index) < min_runs for s in splits]
        weakest = max(range(len(splits)), key=lambda i: (short[i], splits[i].p))
        if not short[weakest] and splits[weakest].p < max_p:
            return splits
        del points[weakest]
    return []
