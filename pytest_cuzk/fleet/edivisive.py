"""Change points in a series of runs: E-divisive means with a Student's t significance test.

The method of Apache Otava (formerly DataStax's Hunter; Fleming et al., "Hunter: Using Change
Point Detection to Hunt for Performance Regressions", ICPE 2023), which MongoDB's CI also runs:

- split: in windows of ``WINDOW`` runs (half-overlapping), E-divisive means (Matteson & James
  2014) proposes the split of a segment that best separates the two sides' distributions (the
  largest energy statistic Q̂), and Student's t-test between the two sides keeps it while p is
  within a first-pass threshold ten times looser than the final one (Otava's ``weak`` points);
- merge: the weakest point (highest p, each tested between its neighbouring points) is dropped
  until every one left is within the threshold.

One difference from Otava: its t-test takes the runs as independent, and one host's runs are
not: a host slow for hours makes neighbouring runs lean the same way, and E-divisive then finds
the split that such a spell best explains. On 30 runs drifting together (AR(1), φ = 0.5) that
test invented a change in a quarter of step-free series. So the merge's t-test counts the runs
as the fewer independent ones they are worth (``_test``, with the drift ``_lag1`` finds); the
split pass keeps Otava's, as its sides may still hold a change not yet found, which would pass
for drift. Otava may so mark changes that this does not; on independent runs the two find the
same planted steps almost always (tests/benchmarks/test_changes_bench.py measures both).

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

__all__ = ["MAX_P", "MAX_RHO", "MIN_RUNS", "WINDOW", "Split", "change_points"]

WINDOW = 50  # Otava's default window: long enough for small shifts, short enough that one big one hides none
MAX_P = 0.001  # Otava's default threshold; tests/benchmarks/test_changes_bench.py measures what it costs
MIN_RUNS = 3  # runs each side of a change at the least: one odd run is the host's drift, not a build
MAX_RHO = 0.9  # then 19 runs count as one: a series of tens of runs can say no more of its drift


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


def _lag1(x: np.ndarray, bounds: list[int]) -> float:
    """The lag-1 autocorrelation the series cannot rule out: its estimate plus one standard error.

    Estimated once for the whole series (a segment of a few runs says little of its drift) from
    the residuals about each segment's mean between ``bounds``, so a real step does not pass for
    drift. The estimate alone falls short where it matters: by about (1 + 3ρ)/n for each mean
    removed (Marriott & Pope, "Bias in the estimation of autocorrelations", Biometrika 41,
    1954), and further where E-divisive has put a split where a spell of drift ends, which
    takes the spell out of the residuals. So the test takes the upper end of the estimate's
    one-standard-error band, Bartlett's (1 - ρ²)/n for AR(1), within [0, MAX_RHO]. On 30 runs
    drifting with ρ = 0.5 at 2% spread (tests/benchmarks/test_changes_bench.py) the bare
    estimate invented a change in 8% of step-free series and found a 10% step in 93%; this
    invents one in 2% and finds the step in 72%. Independent runs lose almost nothing.
    """
    residuals = [x[a:b] - x[a:b].mean() for a, b in itertools.pairwise(bounds) if b > a]
    square = sum(float(r @ r) for r in residuals)
    if square == 0:
        return 0.0
    rho = max(sum(float(r[1:] @ r[:-1]) for r in residuals) / square, 0.0)
    return min(rho + math.sqrt((1 - rho**2) / len(x)), MAX_RHO)


def _test(x: np.ndarray, start: int, index: int, stop: int, rho: float) -> Split:
    """Student's t-test between ``x[start:index]`` and ``x[index:stop]``, runs with autocorrelation ``rho``.

    Otava's test (pooled variance) with the runs counted as the independent ones they are
    worth: at lag-1 autocorrelation ρ a mean of n runs varies as one of n(1 - ρ)/(1 + ρ)
    independent runs (the effective sample size: Zwiers & von Storch, "Taking serial
    correlation into account in tests of the mean", J. Climate 8, 1995; Wilks, "Statistical
    Methods in the Atmospheric Sciences", §5.2.4). So the means' variance grows by
    f = (1 + ρ)/(1 - ρ), the degrees of freedom shrink to n/f - 2, and the pooled variance
    divides by n - 2f, what the squares about two means of drifting runs add up to. At ρ = 0 it
    is Student's test, Otava's.
    """
    before, after = x[start:index], x[index:stop]
    if np.ptp(x[start:stop]) == 0:  # one value throughout (whose means may differ in the last bit)
        return Split(index, start, stop, 0.0, (0.0, 0.0), 1.0)
    shift = float(after.mean() - before.mean())
    if np.ptp(before) == 0 and np.ptp(after) == 0:
        return Split(index, start, stop, shift, (shift, shift), 0.0)
    n1, n2 = len(before), len(after)
    inflation = (1 + rho) / (1 - rho)
    square = float(((before - before.mean()) ** 2).sum() + ((after - after.mean()) ** 2).sum())
    se = math.sqrt(square / max(n1 + n2 - 2 * inflation, 1.0) * (1 / n1 + 1 / n2) * inflation)
    df = max((n1 + n2) / inflation - 2, 1.0)
    p = float(2 * sps.t.sf(abs(shift) / se, df))
    half = float(sps.t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    return Split(index, start, stop, shift, (shift - half, shift + half), p)


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
        if _test(x, a, tau, b, 0.0).p > max_p:
            return points
        points = sorted([*points, tau])


def _tested(x: np.ndarray, points: list[int]) -> list[Split]:
    """Each point tested between its neighbours, with the drift the series shows about all of them."""
    bounds = [0, *points, len(x)]
    rho = _lag1(x, bounds)
    return [_test(x, bounds[i], bounds[i + 1], bounds[i + 2], rho) for i in range(len(points))]


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
