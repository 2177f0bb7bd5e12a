"""The run planned in time: estimates, the run budget's division, and each trade said."""

from __future__ import annotations

import time

import pytest

from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.plan import Plan
from pytest_cuzk.run.timeplan import PlannedTest, RunPlan
from pytest_cuzk.vocab.kinds import KINDS
from pytest_cuzk.vocab.units import rough_duration

PLAN = Plan(min_proofs=10, max_proofs=1000, budget_s=45.0, window_s=5.0, stability_pct=10.0)
POREP = KINDS["porep"]


def _main_job(budget_s: float | None, batch2: bool = False) -> RunPlan:
    """``-k porep`` as collected: test_daemon's three tests, then the cases."""
    kind = Case("local", POREP, 1, 1, axes=())
    tests = [PlannedTest(f"d{i}", kind, measured=False) for i in range(3)]
    tests += [
        PlannedTest("j1", Case("local", POREP, 1, 1), True),
        PlannedTest("j2", Case("local", POREP, 1, 2), True),
    ]
    if batch2:
        tests.append(PlannedTest("b2", Case("local", POREP, 2, 1), True))
    return RunPlan(tests, budget_s, PLAN)


def test_a_case_runs_its_minimum_or_the_waves_that_end_within_its_budget():
    assert PLAN.expected_waves(1.0, 1) == 45
    assert PLAN.expected_waves(75.0, 1) == 10, "the minimum wins over the budget"
    assert PLAN.expected_waves(2.0, 2) == 22


def test_at_real_speed_the_budget_is_divided_and_the_minimum_lowered_with_the_trade_said():
    run = _main_job(900.0)
    assert run.ready({"porep": 75.0}, start_s=300.0, batch_size=1), "the first daemon ready starts the clock"
    j1, j2 = run.tests[3], run.tests[4]
    # 900 s less three one-proof tests (225 s): 675 s, just each case's floor of three waves
    plan, trades = run.plan_for(j1, PLAN)
    assert plan.min_proofs == 3 and plan.budget_s == 45.0, "3 waves of 75 s fit its 225 s"
    assert trades == ["minimum proofs 10 -> 3 (3 waves of ~75 s fit its share ~4 min)"]
    plan2, _ = run.plan_for(j2, PLAN)
    assert plan2.min_proofs == 6, "3 waves of two, the fewest that give throughput an interval"
    assert run.left_s() == pytest.approx(225 + 3 * 75 + 3 * 150)
    lines = run.lines()
    assert lines[0].startswith(
        "cuzk: a proof takes porep ~75 s here (the warm-up); the run will take ~15 min"
    )
    assert "porep-batch1-j1: ~4 min (3 proofs)" in lines[1]


def test_time_a_case_did_not_use_goes_to_the_next():
    run = _main_job(900.0)
    run.ready({"porep": 75.0}, start_s=300.0, batch_size=1)
    for done in ("d0", "d1", "d2", "j1"):
        run.finished(done)
    run.ready_at = time.monotonic() - 290.0  # 290 s spent: 610 s left for the last case
    plan, _ = run.plan_for(run.tests[4], PLAN)
    assert plan.min_proofs == 8, "4 waves of two proofs fit its 610 s"


def test_a_restart_is_counted_at_what_the_last_start_cost():
    run = _main_job(None, batch2=True)
    run.ready({"porep": 2.0}, start_s=30.0, batch_size=1)
    assert run.left_s() == pytest.approx(3 * 2.0 + 22 * 2.0 + 11 * 4.0 + 11 * 4.0 + 30.0)
    assert run.plan_for(run.tests[3], PLAN) == (PLAN, []), "no run budget: no trade"


def test_a_minimum_that_overruns_its_budget_is_said_before_the_case_starts():
    run = _main_job(None)
    run.ready({"porep": 75.0}, start_s=0.0, batch_size=1)
    said = run.overrun(Case("local", POREP, 1, 1), PLAN)
    assert said == "its minimum of 10 proofs will take ~12 min here, 16.7x its 45 s budget: the minimum wins"
    assert run.overrun(Case("local", KINDS["winning"], 1, 1), PLAN) is None, "no proof of it timed yet"


def test_measured_waves_replace_the_warm_up():
    run = _main_job(None)
    run.ready({"porep": 6.0}, start_s=0.0, batch_size=1)
    run.waves_done(Case("local", POREP, 1, 1), 2.0)
    assert run.wave_cost(Case("local", POREP, 1, 2)) == 4.0
    run.waves_done(Case("local", POREP, 1, 2), 3.0)
    assert run.wave_cost(Case("local", POREP, 1, 2)) == 3.0


@pytest.mark.parametrize(
    ("seconds", "said"), [(0.2, "~1 s"), (75, "~75 s"), (330, "~6 min"), (9000, "~2.5 h")]
)
def test_a_rough_duration_is_rounded_as_an_estimate(seconds, said):
    assert rough_duration(seconds) == said
