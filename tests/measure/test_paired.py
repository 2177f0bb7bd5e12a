"""The paired change of an A/B case: drift that moves both builds cancels; too few pairs give no interval."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import Figures
from pytest_cuzk.measure.paired import PairedAB


def test_drift_that_moves_both_builds_cancels_in_the_pairs():
    rng = np.random.default_rng(3)
    drift = np.exp(np.cumsum(rng.normal(0, 0.15, 12)))  # the host: up to several times slower over the run
    baseline = 0.5 * drift * rng.normal(1, 0.01, 12)
    candidate = 0.5 * 1.10 * drift * rng.normal(1, 0.01, 12)
    paired = stats.paired_rate(candidate, baseline)
    assert paired is not None and paired.interval is not None and paired.p_value is not None
    assert paired.ratio == pytest.approx(1 / 1.10, rel=0.01)
    assert paired.interval[1] < 1 / 1.05 and paired.p_value < 1e-6
    unpaired, p = stats.Rate().ratio(baseline, candidate)  # the same windows as two runs: drift swamps it
    assert unpaired is not None and p is not None and p > 0.05 and unpaired[0] < 1 < unpaired[1]


def test_too_few_pairs_give_a_point_without_an_interval_and_equal_ones_a_point():
    two = stats.paired_rate([1.1, 1.1], [1.0, 1.0])
    assert (
        two is not None
        and two.ratio == pytest.approx(1 / 1.1)
        and two.interval is None
        and two.p_value is None
    )
    same = stats.paired_rate([2.0, 3.0, 4.0], [2.0, 3.0, 4.0])
    assert same is not None and same.interval == (1.0, 1.0) and same.p_value == 1.0
    assert stats.paired_rate([], [1.0]) is None


def test_the_pair_record_round_trips_with_the_case_figures():
    base = Figures("t", "baseline", "winning", 1, 1, 10, 0, 3.0, 9000.0, 0.1, 0.2, 0.3)
    ab = PairedAB(
        base, "cand 1", "base 1", "side-by-side", 7, "BC CB BC", 1, (0.1, 0.12, 0.08), 0.9, (0.85, 0.95), 0.01
    )
    figures = Figures("t", "local", "winning", 1, 1, 10, 0, 3.0, 8100.0, 0.1, 0.2, 0.3, ab=ab)
    back = Figures.from_dict(figures.to_dict())
    assert back == figures
    assert back.ab is not None and back.ab.describe() == "throughput -10.0% (95% CI -15.0% to -5.0%, p=0.01)"
    assert back.ab.how() == "3 pairs, side by side, seed 7, order BC CB BC"
