"""How often ``cuzk-perf changes`` finds a planted step, and how often it finds one that is not there.

Each trial is one host's series of 30 runs' throughput with the run-to-run spread hosts show
(CV 0.5%: a quiet dedicated GPU host; 2%: a busy one; 4%: a shared or rented one), searched at
the defaults (p < 0.001, at least 3 runs each side): once with a build 10% slower from a run
drawn between the 5th and the 26th, once without. Trials are seeded: the same figures come back.
The last two rows draw the runs from a drifting host instead (each run's deviation half its
predecessor's plus new noise, AR(1) with φ = 0.5, at 2% and 4% spread): runs that lean on each
other make false changes likelier, which is what one host's hour-long drift does, and which the
t-test's effective sample size (``edivisive._test``) answers. Targets, at CV 0.5% and 2%: a
change found in at most 5% of step-free series, independent runs or drifting; the step found at
the right build in at least 90% of trials on independent runs, in most (50%) on drifting ones,
whose runs are worth fewer. Run:
``python -m pytest tests/benchmarks/test_changes_bench.py --figures -s``
(``CUZK_CHANGES_BENCH_TRIALS`` sets the trials per row, default 500).
"""

from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pytest

from pytest_cuzk.fleet.changes import find
from pytest_cuzk.fleet.edivisive import MAX_P, MIN_RUNS
from pytest_cuzk.fleet.series import Point, Series
from pytest_cuzk.measure.figures import METRICS

TRIALS = int(os.environ.get("CUZK_CHANGES_BENCH_TRIALS", "500"))
RUNS = 30
STEP = 0.9  # the planted build's throughput, relative
T0 = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
FOUND_TARGET, FALSE_TARGET = 0.90, 0.05
DRIFT_FOUND_TARGET = 0.5  # drifting runs are worth fewer: the step found in most series, not nearly all


def _series(values: np.ndarray) -> Series:
    points = tuple(
        Point(f"run{i}", f"build{i}", T0 + dt.timedelta(hours=i), float(v)) for i, v in enumerate(values)
    )
    return Series("porep", "batch1-j1", "f" * 64, "bench", METRICS["throughput"], points)


def _noise(rng: np.random.Generator, cv: float, phi: float) -> np.ndarray:
    """``RUNS`` relative deviations with spread ``cv``, each ``phi`` of the one before plus new noise."""
    fresh = rng.standard_normal(RUNS) * cv * np.sqrt(1 - phi**2)
    out = np.empty(RUNS)
    out[0] = rng.standard_normal() * cv
    for i in range(1, RUNS):
        out[i] = phi * out[i - 1] + fresh[i]
    return out


@pytest.mark.parametrize(
    ("cv", "phi"),
    [(0.005, 0.0), (0.02, 0.0), (0.04, 0.0), (0.02, 0.5), (0.04, 0.5)],
    ids=["cv0.5", "cv2", "cv4", "cv2-drift", "cv4-drift"],
)
def test_a_planted_10pct_step_is_found_and_no_step_is_not_invented(cv: float, phi: float) -> None:
    rng = np.random.default_rng(int(cv * 1000) * 10 + int(phi * 10))
    exact = near = false = wrong_too = 0
    for _ in range(TRIALS):
        at = int(rng.integers(5, RUNS - 4))
        level = np.where(np.arange(RUNS) >= at, STEP, 1.0)
        stepped = find(_series(1000 * level * (1 + _noise(rng, cv, phi))), MAX_P, MIN_RUNS)
        runs = [int(c.after.run_id.removeprefix("run")) for c in stepped]
        exact += at in runs
        near += any(abs(r - at) <= 1 for r in runs)
        wrong_too += any(abs(r - at) > 1 for r in runs)
        false += bool(find(_series(1000 * (1 + _noise(rng, cv, phi))), MAX_P, MIN_RUNS))
    noise = "independent runs" if phi == 0 else f"drifting runs (AR(1), phi={phi})"
    print(
        f"\n[changes] {TRIALS} trials, {RUNS} runs, CV {cv * 100:g}%, {noise}, p < {MAX_P:g}, "
        f"{MIN_RUNS} runs each side: 10% step found at the right build {exact / TRIALS:.1%} "
        f"(within one run {near / TRIALS:.1%}; another change reported too {wrong_too / TRIALS:.1%}); "
        f"a change found in {false / TRIALS:.1%} of step-free series"
    )
    if cv <= 0.02:
        assert exact / TRIALS >= (FOUND_TARGET if phi == 0 else DRIFT_FOUND_TARGET)
        assert false / TRIALS <= FALSE_TARGET
