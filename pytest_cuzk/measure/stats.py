"""The statistics behind every figure with an uncertainty: percentiles, spread, intervals, tests.

numpy computes percentiles and spread; scipy gives the t distribution, the bootstrap and the
Mann–Whitney U test, so no distribution is written by hand here. A figure is estimated by one of
two estimators, each with its own interval and its own test of a change between runs:

- ``Rate`` (throughput) from the windows' seconds per proof. A window's figure is a mean over
  many proofs, so windows are near-normal, and a case has few of them: Student's t gives the
  interval, and Welch's t-test on the logarithms gives the ratio between runs and its p-value
  (a bootstrap of 3 to 10 values is too narrow, and a rank test of so few cannot reach p < 0.05).
- ``paired_rate``: two builds' throughput from windows measured in pairs through the same
  minutes (``--cuzk-ab``), one log-ratio per pair, Stein's two-stage t interval over them (the
  spread of a first stage that doubles as the count does, not re-estimated at each pair: an A/B
  case stops once precise, and stopping when the latest spread happens to look small makes
  intervals too narrow).
- ``Quantile`` (a latency percentile) from the proofs' latencies: skewed (a slow proof is far
  slower than a fast one is fast) and tens to thousands of them, so BCa bootstrap intervals
  (bias-corrected and accelerated, no normality assumed) and the Mann–Whitney U rank test.

Every bootstrap uses a fixed seed: the same samples always give the same interval, so a rerun of
``cuzk-perf compare`` agrees with the gate.
"""

from __future__ import annotations

import abc
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from scipy import stats as sps

__all__ = [
    "ALPHA",
    "CONFIDENCE",
    "FIRST_PAIRS",
    "MIN_INTERVAL_SAMPLES",
    "PRECISE_SHARE",
    "Drift",
    "Estimator",
    "PairedRatio",
    "Quantile",
    "Rate",
    "cv",
    "drift",
    "half_width_pct",
    "paired_rate",
    "percentile",
    "percentile_floor",
    "stage_pairs",
]

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
MIN_INTERVAL_SAMPLES = 3  # fewer and an interval only restates the two values
FIRST_PAIRS = 6  # Stein's first stage: the pairs whose spread sets the paired interval up to 11 pairs
# A paired change whose 95% half-interval is within this share of its limit is precise enough
# for its point estimate to decide: an unchanged build then lands beyond the limit once in 200
# runs (the limit is the 99.5th percentile of t over the first stage's 5 degrees of freedom
# away: 4.0 standard errors), a build slower by twice the limit nearly never short of it.
PRECISE_SHARE = float(sps.t.ppf(1 - ALPHA / 2, FIRST_PAIRS - 1) / sps.t.ppf(0.995, FIRST_PAIRS - 1))
RESAMPLES = 4999
SEED = 14

Interval = tuple[float, float]


class Estimator(Protocol):
    """How a figure comes from its samples, how sure it is, and how to test a change in it."""

    def __call__(self, values: Any, axis: int = -1) -> Any:
        """The figure (vectorized along ``axis``)."""

    def interval(self, values: Sequence[float]) -> Interval | None:
        """Its 95% interval; None with fewer than ``MIN_INTERVAL_SAMPLES`` values."""

    def ratio(self, before: Sequence[float], after: Sequence[float]) -> tuple[Interval | None, float | None]:
        """The 95% interval of figure(after) / figure(before), and the two-sided p-value of no change."""


def _few(*samples: Sequence[float] | np.ndarray) -> bool:
    return min(len(s) for s in samples) < MIN_INTERVAL_SAMPLES


class _Interval(abc.ABC):
    """The interval rule both estimators share: none from too few values, a point from equal ones."""

    @abc.abstractmethod
    def __call__(self, values: Any, axis: int = -1) -> Any: ...

    @abc.abstractmethod
    def _spread_interval(self, x: np.ndarray) -> Interval | None:
        """The interval of values that differ."""

    def interval(self, values: Sequence[float]) -> Interval | None:
        x = np.asarray(values, dtype=float)
        if _few(x):
            return None
        if np.ptp(x) == 0:  # every value the same: the interval is that one point
            point = float(self(x))
            return point, point
        return self._spread_interval(x)


@dataclass(frozen=True)
class Rate(_Interval):
    """Proofs per hour from seconds per proof (of each window): the window-weighted rate."""

    def __call__(self, values: Any, axis: int = -1) -> Any:
        return 3600.0 / np.mean(values, axis=axis)

    def _spread_interval(self, x: np.ndarray) -> Interval | None:
        """None where the windows vary so much that the mean's interval reaches zero seconds per proof.

        Such a rate has no upper bound: inverted, its interval would come out negative.
        """
        mean = sps.ttest_1samp(x, x.mean()).confidence_interval(CONFIDENCE)
        if mean.low <= 0:
            return None
        return 3600.0 / float(mean.high), 3600.0 / float(mean.low)

    def ratio(self, before: Sequence[float], after: Sequence[float]) -> tuple[Interval | None, float | None]:
        a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
        if _few(a, b):
            return None, None
        if np.ptp(a) == 0 and np.ptp(b) == 0:
            point = float(self(b) / self(a))
            return (point, point), 1.0 if point == 1.0 else 0.0
        test = sps.ttest_ind(np.log(b), np.log(a), equal_var=False)
        slower = test.confidence_interval(CONFIDENCE)  # of log(seconds after / seconds before)
        return (math.exp(-slower.high), math.exp(-slower.low)), float(test.pvalue)


@dataclass(frozen=True)
class Quantile(_Interval):
    """The ``q``-th percentile (0..100, linear interpolation) of the proofs' latencies."""

    q: float

    def __call__(self, values: Any, axis: int = -1) -> Any:
        return np.percentile(values, self.q, axis=axis)

    def _spread_interval(self, x: np.ndarray) -> Interval | None:
        return _bootstrap((x,), self)

    def ratio(self, before: Sequence[float], after: Sequence[float]) -> tuple[Interval | None, float | None]:
        a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
        if _few(a, b):
            return None, None
        if np.ptp(np.concatenate([a, b])) == 0:
            return (1.0, 1.0), 1.0  # identical constants: no evidence of any difference
        p = float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        if np.ptp(a) == 0 and np.ptp(b) == 0:
            point = float(self(b) / self(a))
            return (point, point), p

        def ratio(x: Any, y: Any, axis: int = -1) -> Any:
            return self(y, axis=axis) / self(x, axis=axis)

        return _bootstrap((a, b), ratio), p


def _bootstrap(data: tuple[Any, ...], statistic: Any) -> Interval | None:
    """The 95% BCa interval of ``statistic`` over ``data``, each sample resampled on its own."""
    with warnings.catch_warnings():
        # BCa warns (and answers NaN) on degenerate data; the caller then has no interval.
        warnings.simplefilter("ignore")
        res = sps.bootstrap(
            data,
            statistic,
            n_resamples=RESAMPLES,
            confidence_level=CONFIDENCE,
            method="BCa",
            vectorized=True,
            rng=np.random.default_rng(SEED),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return None if math.isnan(low) or math.isnan(high) else (low, high)


def percentile_floor(q: float) -> int:
    """Samples a percentile needs before it says more than the extreme: p90 needs 10, p99 100.

    A median (and anything below it) of one proof is that proof's figure, not an extreme.
    """
    return math.ceil(round(1 / (1 - q / 100), 6)) if 50 < q < 100 else 1


def percentile(values: Sequence[float], q: float) -> tuple[float | None, str | None]:
    """The percentile, or None with the reason when there are too few values for it."""
    need = percentile_floor(q)
    if len(values) < need:
        have = f"{len(values)} measured" if values else "none measured"
        return None, f"needs at least {need} proofs, {have}"
    return float(np.percentile(values, q)), None


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation (sample standard deviation over the mean); None below 2 values."""
    if len(values) < 2:
        return None
    mean = float(np.mean(values))
    return float(np.std(values, ddof=1)) / mean if mean else None


def half_width_pct(values: Sequence[float], estimator: Estimator) -> float | None:
    """Half the 95% interval of ``estimator`` over ``values``, in percent of its value."""
    interval = estimator.interval(values)
    point = float(estimator(np.asarray(values, dtype=float))) if interval is not None else 0.0
    if interval is None or not point:
        return None
    return (interval[1] - interval[0]) / 2 / abs(point) * 100


@dataclass(frozen=True)
class PairedRatio:
    """figure(candidate) / figure(control) from paired samples: its point, 95% interval and p-value."""

    pairs: int
    ratio: float
    interval: Interval | None
    p_value: float | None


def stage_pairs(n: int) -> int:
    """How many first pairs' spread sets the interval at ``n`` pairs: 6, then 12, 24, ... from that count.

    A function of the count alone, so at every count the spread it uses is independent of the
    mean (Stein's argument holds), while a case that runs long is no longer held to six pairs'
    noisy spread and Student's t at 5 degrees of freedom: where pairs spread 10%, a 10% slower
    build is caught by 30 pairs 80 times in 100 rather than 61, unchanged builds failing as rarely.
    """
    stage = FIRST_PAIRS
    while 2 * stage <= n:
        stage *= 2
    return min(stage, n)


def paired_rate(candidate: Sequence[float], control: Sequence[float]) -> PairedRatio | None:
    """The throughput ratio of two builds from pairs of seconds per proof measured side by side.

    Each pair gives a log-ratio; their mean is the change: drift that moves both halves of a pair
    cancels in it, which no test of two runs made at different times can do. Its interval and
    test are Student's t, with the spread of the first ``stage_pairs(n)`` pairs (Stein's
    two-stage procedure, its first stage doubling with the count): the mean over n pairs is then
    t-distributed with that stage's degrees of freedom, whenever the run stops, as long as it
    stops on the interval's width (which that spread alone sets), and not on the spread of all
    pairs so far (with which identical builds on a drifting host failed 1 run in 5). Pairs are
    ``zip``'s: the longer series' unpaired tail is left out.
    """
    n = min(len(candidate), len(control))
    if n == 0:
        return None
    slower = np.log(np.asarray(candidate[:n], dtype=float) / np.asarray(control[:n], dtype=float))
    mean = float(slower.mean())
    ratio = math.exp(-mean)
    if n < MIN_INTERVAL_SAMPLES:
        return PairedRatio(n, ratio, None, None)
    first = slower[: stage_pairs(n)]
    if np.ptp(first) == 0:
        return PairedRatio(n, ratio, (ratio, ratio), 1.0 if ratio == 1.0 else 0.0)
    df = len(first) - 1
    se = float(first.std(ddof=1)) / math.sqrt(n)
    half = float(sps.t.ppf(1 - ALPHA / 2, df)) * se
    p_value = float(2 * sps.t.sf(abs(mean) / se, df))
    return PairedRatio(n, ratio, (math.exp(-mean - half), math.exp(-mean + half)), p_value)


@dataclass(frozen=True)
class Drift:
    """How much a series moved over a run: a least-squares line through it, as percent of its mean.

    ``change_pct`` is the line's rise from the first value to the last; ``interval`` its 95%
    interval (Student's t on the slope, n - 2 degrees of freedom). A run drifts when that interval
    excludes zero; it is steady within a band only when the interval lies inside the band, which
    a few long proofs never show: one-proof windows that happen to agree are no evidence.
    """

    n: int
    change_pct: float
    interval: Interval

    def drifting(self) -> bool:
        low, high = self.interval
        return low > 0 or high < 0

    def within(self, band_pct: float) -> bool:
        low, high = self.interval
        return -band_pct <= low and high <= band_pct


def drift(values: Sequence[float]) -> Drift | None:
    """The series' drift over the run, in order; None below ``MIN_INTERVAL_SAMPLES`` values or a zero mean."""
    y = np.asarray(values, dtype=float)
    mean = float(y.mean()) if len(y) else 0.0
    if len(y) < MIN_INTERVAL_SAMPLES or not mean:
        return None
    span = 100 * (len(y) - 1) / abs(mean)  # a slope per value, as percent of the mean over the run
    if np.ptp(y) == 0:
        return Drift(len(y), 0.0, (0.0, 0.0))
    fit = sps.linregress(np.arange(len(y), dtype=float), y)
    half = float(sps.t.ppf(1 - ALPHA / 2, len(y) - 2)) * float(fit.stderr)
    slope = float(fit.slope)
    return Drift(len(y), slope * span, ((slope - half) * span, (slope + half) * span))
