"""The statistics behind every figure with an uncertainty: percentiles, spread, intervals, tests.

numpy computes percentiles and spread; scipy gives the bootstrap and the Mann–Whitney U test,
so no distribution is written by hand here. Proof timings are skewed (a slow proof is far
slower than a fast one is fast) and a case has tens of them, not thousands, so intervals are
BCa bootstrap intervals (bias-corrected and accelerated: no normality assumed, good coverage
for skewed samples) and tests are rank tests. Every bootstrap uses a fixed seed: the same
samples always give the same interval, so a rerun of ``cuzk-perf compare`` agrees with the gate.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats as sps

__all__ = [
    "ALPHA",
    "CONFIDENCE",
    "MIN_INTERVAL_SAMPLES",
    "Estimator",
    "ci",
    "cv",
    "half_width_pct",
    "mann_whitney_p",
    "per_hour",
    "percentile",
    "percentile_floor",
    "quantile",
    "ratio_ci",
]

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
MIN_INTERVAL_SAMPLES = 3  # fewer and a bootstrap only reshuffles the same two values
RESAMPLES = 4999
SEED = 14

# An estimator maps samples (along the last axis) to one figure, vectorized for the bootstrap.
Estimator = Callable[..., Any]


def per_hour(seconds_per_proof: Any, axis: int = -1) -> Any:
    """Proofs per hour from seconds per proof of each wave: the wave-weighted rate."""
    return 3600.0 / np.mean(seconds_per_proof, axis=axis)


def quantile(q: float) -> Estimator:
    """The ``q``-th percentile (0..100, linear interpolation) as an estimator."""

    def estimate(values: Any, axis: int = -1) -> Any:
        return np.percentile(values, q, axis=axis)

    return estimate


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


def _bootstrap(data: tuple[Any, ...], statistic: Estimator) -> tuple[float, float] | None:
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


def ci(values: Sequence[float], estimator: Estimator) -> tuple[float, float] | None:
    """The 95% BCa bootstrap interval of ``estimator`` over ``values``; None with too few values."""
    x = np.asarray(values, dtype=float)
    if len(x) < MIN_INTERVAL_SAMPLES:
        return None
    if np.ptp(x) == 0:  # every value the same: the interval is that one point
        point = float(estimator(x))
        return point, point
    return _bootstrap((x,), estimator)


def half_width_pct(values: Sequence[float], estimator: Estimator) -> float | None:
    """Half the 95% interval of ``estimator`` over ``values``, in percent of its value."""
    interval = ci(values, estimator)
    point = float(estimator(np.asarray(values, dtype=float))) if interval is not None else 0.0
    if interval is None or not point:
        return None
    return (interval[1] - interval[0]) / 2 / abs(point) * 100


def ratio_ci(
    before: Sequence[float], after: Sequence[float], estimator: Estimator
) -> tuple[float, float] | None:
    """The 95% BCa interval of ``estimator(after) / estimator(before)``, each run resampled on its own."""
    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if min(len(a), len(b)) < MIN_INTERVAL_SAMPLES:
        return None
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        point = float(estimator(b) / estimator(a))
        return point, point

    def ratio(x: Any, y: Any, axis: int = -1) -> Any:
        return estimator(y, axis=axis) / estimator(x, axis=axis)

    return _bootstrap((a, b), ratio)


def mann_whitney_p(before: Sequence[float], after: Sequence[float]) -> float | None:
    """Two-sided Mann–Whitney U p-value that both samples come from one distribution."""
    if min(len(before), len(after)) < MIN_INTERVAL_SAMPLES:
        return None
    if np.ptp(np.concatenate([before, after])) == 0:
        return 1.0  # identical constants: no evidence of any difference
    return float(sps.mannwhitneyu(before, after, alternative="two-sided").pvalue)
