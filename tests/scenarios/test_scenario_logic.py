"""The load scenarios' own logic, without a daemon: arrivals, the rate search, bounds, the knee, records."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from pytest_cuzk.run.waves import ProofOutcome
from pytest_cuzk.scenarios.bounds import Budget, Tail
from pytest_cuzk.scenarios.records import (
    PriorityFigures,
    RateStep,
    ServerFigures,
    SweepFigures,
    SweepPoint,
    scenario_from_dict,
)
from pytest_cuzk.scenarios.search import RateSearch, arrival_offsets
from pytest_cuzk.scenarios.sweep import knee


def test_arrivals_are_poisson_at_the_rate_and_the_same_every_time():
    offsets = arrival_offsets(4000, rate_per_hour=7200)  # 2 per second
    assert offsets == arrival_offsets(4000, rate_per_hour=7200), "seeded: a rerun sends the same schedule"
    assert offsets[0] == 0.0 and (np.diff(offsets) >= 0).all()
    gaps = np.diff(offsets)
    assert np.mean(gaps) == pytest.approx(0.5, rel=0.05)
    assert sps.kstest(gaps, "expon", args=(0, 0.5)).pvalue > 0.01, "exponential gaps"
    doubled = arrival_offsets(4000, rate_per_hour=14400)
    assert np.allclose(np.array(doubled) * 2, offsets), "every rate scales the same unit gaps"


@pytest.mark.parametrize("capacity", [700.0, 2600.0, 9000.0])
def test_the_search_brackets_the_highest_rate_that_holds(capacity):
    search, tried = RateSearch(start_per_hour=1000.0, max_steps=12), []
    while (rate := search.next_rate(tried)) is not None:
        tried.append((rate, rate <= capacity))
    low, high = search.bracket(tried)
    assert low is not None and high is not None
    assert low <= capacity < high and high / low <= 1.1, tried


def test_the_search_believes_no_rate_that_held_above_one_that_missed():
    search = RateSearch(start_per_hour=1000.0)
    assert search.bracket([(1000.0, True), (2000.0, False), (1400.0, False), (1700.0, True)]) == (
        1000.0,
        1400.0,
    )
    assert search.next_rate([(1000.0, False)] * 8) is None
    assert search.why_done([(1000.0, False)] * 8) == "8 rates tried"


def _records(latencies: list[float], failed: int = 0) -> list[ProofOutcome]:
    ok = [ProofOutcome(f"job-{i}", True, v) for i, v in enumerate(latencies)]
    return ok + [ProofOutcome(f"bad-{i}", False, 0.0, "FAILED: x") for i in range(failed)]


def test_below_100_proofs_the_slowest_is_judged_and_said_so():
    tail = Tail.of(_records([0.1] * 9 + [0.6]), bound_s=0.5, planned=10)
    assert (tail.late, tail.allowed, tail.met) == (1, 0, False)
    assert tail.p99 is None and tail.judged_s == 0.6
    assert tail.basis == "the slowest of 10; a p99 needs 100"
    assert Tail.of(_records([0.1] * 10), 0.5, 10).met


def test_from_100_proofs_1_percent_may_be_late():
    held = Tail.of(_records([0.1] * 99 + [0.9]), bound_s=0.5, planned=100)
    assert (held.late, held.allowed, held.met, held.basis) == (1, 1, True, "p99")
    assert held.p99 is not None and held.p99 <= 0.5
    assert not Tail.of(_records([0.1] * 98 + [0.9] * 2), 0.5, 100).met
    assert not Tail.of(_records([0.1] * 98 + [0.9], failed=1), 0.5, 100).met, "a failed proof counts as late"
    assert Tail.of(_records([0.1] * 10), 0.5, 10).goodput_per_hour(seconds=36.0) == 1000.0


def test_the_budget_admits_the_scenarios_minimum_whatever_it_costs():
    budget = Budget(seconds=10.0, proofs=20)
    assert budget.admit(seconds=100.0, proofs=50, least=True) == ""
    budget.spend(15)
    assert budget.admit(1.0, 10) == "--cuzk-max-proofs 20 would be passed"
    assert budget.admit(100.0, 1) == "the 10 s budget (--cuzk-scenario-budget) would be overrun"
    assert budget.admit(1.0, 5) == "" and budget.proofs_left == 5


def _point(in_flight: int, rate: float) -> SweepPoint:
    return SweepPoint(in_flight=in_flight, concurrency=in_flight, throughput_proofs_per_hour=rate)


def test_the_knee_is_the_fewest_in_flight_within_5_percent_of_the_best():
    curve = [_point(1, 3800.0), _point(2, 4210.0), _point(3, 4330.0), _point(4, 4340.0)]
    assert knee(curve) == curve[1]
    assert knee([_point(1, 100.0), _point(2, 200.0)]) == _point(2, 200.0)
    assert knee([]) is None


def test_records_travel_as_dicts_and_come_back_whole():
    shared = {"test": "t", "label": "local", "kind": "porep", "batch_size": 2, "na_reasons": {"x": "y"}}
    step = RateStep(rate_per_hour=1.5, planned=10, sent=9, late=2, held=False, latency_p50_s=0.2)
    records = [
        ServerFigures(**shared, rates=(step,), max_sustainable_rate_per_hour=None),
        PriorityFigures(**shared, background_kind="porep", latencies_s=(0.1, 0.2), slo_met=True),
        SweepFigures(**shared, curve=(SweepPoint(in_flight=2, concurrency=1, throughput_proofs_per_hour=9.0,
                                                 throughput_proofs_per_hour_ci=(8.0, 10.0)),)),
    ]  # fmt: skip
    for record in records:
        wire = record.to_dict()
        assert wire["scenario"] == record.scenario
        assert scenario_from_dict(wire) == record
