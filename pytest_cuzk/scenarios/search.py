"""Poisson arrivals and the search for the highest rate a daemon sustains within a latency bound.

Arrivals are seeded: every rate step draws the same unit-rate exponential gaps and scales them,
so two rates differ only in their rate (common random numbers), and a rerun issues the same
schedule. The search (MLPerf LoadGen's FindPeakPerformance, geometric) doubles the rate until a
step misses the bound, halves it until one holds, then bisects between the highest rate that
held and the lowest that missed until they are within ``resolution`` of each other. A rate that
held above one that missed is noise of a short step and is not believed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SEED", "RateSearch", "arrival_offsets"]

SEED = 15


def arrival_offsets(count: int, rate_per_hour: float, seed: int = SEED) -> list[float]:
    """Seconds after the step starts at which each of ``count`` Poisson arrivals is due (the first at 0)."""
    gaps = np.random.default_rng(seed).exponential(3600.0 / rate_per_hour, count)
    return [0.0, *np.cumsum(gaps[:-1]).tolist()]


@dataclass(frozen=True)
class RateSearch:
    """The next rate to try, from the rates tried and whether each held its bound."""

    start_per_hour: float
    resolution: float = 0.1  # done when the highest rate held and the lowest missed are this close
    max_steps: int = 8

    def bracket(self, tried: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
        """(highest rate that held below every miss, lowest rate that missed)."""
        missed = min((r for r, held in tried if not held), default=None)
        held = [r for r, ok in tried if ok and (missed is None or r < missed)]
        return max(held, default=None), missed

    def next_rate(self, tried: Sequence[tuple[float, bool]]) -> float | None:
        """The next rate per hour, or None when the search is done."""
        if not tried:
            return self.start_per_hour
        if len(tried) >= self.max_steps:
            return None
        low, high = self.bracket(tried)
        if high is None:
            assert low is not None, "a step either held or missed"
            return low * 2
        if low is None:
            return high / 2
        if high / low <= 1 + self.resolution:
            return None
        return math.sqrt(low * high)

    def why_done(self, tried: Sequence[tuple[float, bool]]) -> str:
        """Why ``next_rate`` said done."""
        if len(tried) >= self.max_steps:
            return f"{self.max_steps} rates tried"
        return f"the highest rate held and the lowest missed are within {self.resolution:.0%}"
