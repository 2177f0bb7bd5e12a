"""``test_sweep``: throughput at 1, 2, 3 ... clients in flight, until it stops growing; and its knee.

What a user tunes ``-j`` (``--cuzk-concurrency``, Curio's MaxPending) and ``max_batch_size`` with,
as Triton's perf_analyzer does with ``--concurrency-range``: each level is a suite case of the
same kind and batch size at the next concurrency, measured like ``test_prove`` (waves in windows
until stable, here within a quarter of the scenario budget and at least 3 waves, so each level has
its 95% interval). The sweep stops once two levels in a row gain less than 5% over the best level
before them, at concurrency 16, or at the budget. The knee is the fewest proofs in flight whose
throughput is within 5% of the best: more in flight past it only queues (latency grows, Little's law).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.measure import stats
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.execution import Running
from pytest_cuzk.run.plan import Plan, run_case
from pytest_cuzk.run.tally import case_figures
from pytest_cuzk.run.waves import ProofOutcome
from pytest_cuzk.scenarios.bounds import Budget
from pytest_cuzk.scenarios.records import SweepFigures, SweepPoint

__all__ = ["FLAT_LEVELS", "GAIN_PCT", "MAX_CONCURRENCY", "Sweep", "knee"]

GAIN_PCT = 5.0  # less than this over the best level before it is no gain
FLAT_LEVELS = 2  # levels in a row without a gain that end the sweep
MAX_CONCURRENCY = 16
LEVEL_SHARE = 4  # a level measures for at most this fraction of the scenario budget


def knee(points: list[SweepPoint]) -> SweepPoint | None:
    """The level with the fewest proofs in flight whose throughput is within ``GAIN_PCT`` of the best."""
    best = max((p.throughput_proofs_per_hour for p in points), default=0.0)
    near = [p for p in points if best and p.throughput_proofs_per_hour >= best * (1 - GAIN_PCT / 100)]
    return min(near, key=lambda p: p.in_flight, default=None)


class Sweep:
    """The concurrency sweep of one kind at one batch size on one daemon."""

    def __init__(self, case: Case, run: Running, settings: Settings, budget: Budget) -> None:
        self.case = case
        self.runner = run.runner(case.kind)
        self.settings = settings
        self.budget = budget
        self.proofs: list[ProofOutcome] = []
        self.points: list[SweepPoint] = []
        self.stop_reason = f"concurrency {MAX_CONCURRENCY} reached"

    def run(self) -> None:
        s, best, flat, last_s = self.settings, 0.0, 0, 0.0
        for j in range(1, MAX_CONCURRENCY + 1):
            level = dataclasses.replace(self.case, concurrency=j, axes=("batch", "j"))
            fewest = max(s.proofs, stats.MIN_INTERVAL_SAMPLES * level.in_flight)
            if why := self.budget.admit(last_s, fewest, least=j == 1):
                self.stop_reason = why
                return
            most = max(fewest, min(s.max_proofs, self.budget.proofs_left))
            plan = Plan(
                fewest, most, min(s.case_budget, self.budget.seconds / LEVEL_SHARE), s.window, s.stability
            )
            result = run_case(level, self.runner, plan, None)
            self.proofs += result.proofs
            self.budget.spend(len(result.proofs))
            last_s = result.wall_s
            figures = case_figures(result, level.id)
            rate = figures.throughput_proofs_per_hour
            gain = round((rate / best - 1) * 100, 2) if best else None
            self.points.append(
                SweepPoint(
                    in_flight=level.in_flight,
                    concurrency=j,
                    throughput_proofs_per_hour=rate,
                    throughput_proofs_per_hour_ci=figures.throughput_proofs_per_hour_ci,
                    latency_p50_s=figures.latency_p50_s,
                    latency_p90_s=figures.latency_p90_s,
                    proofs=len(result.proofs),
                    gain_pct=gain,
                    stop_reason=result.stop_reason,
                )
            )
            if result.failed:
                self.stop_reason = "a proof failed"
                return
            flat = flat + 1 if gain is not None and gain < GAIN_PCT else 0
            best = max(best, rate)
            if flat >= FLAT_LEVELS:
                self.stop_reason = f"{FLAT_LEVELS} levels in a row gained less than {GAIN_PCT:g}%"
                return

    def figures(self, **shared: Any) -> SweepFigures:
        point = knee(self.points)
        reasons: dict[str, str] = dict(shared.pop("na_reasons"))
        if point is None:
            reasons["knee_in_flight"] = "no level completed a proof"
        best = max((p.throughput_proofs_per_hour for p in self.points), default=None)
        return SweepFigures(
            **shared,
            na_reasons=reasons,
            curve=tuple(self.points),
            knee_in_flight=point.in_flight if point else None,
            knee_concurrency=point.concurrency if point else None,
            knee_throughput_proofs_per_hour=point.throughput_proofs_per_hour if point else None,
            max_throughput_proofs_per_hour=best,
        )
