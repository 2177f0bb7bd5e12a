"""``test_server``: open-loop Poisson arrivals, and the highest rate whose p99 holds the latency bound.

First the kind's idle latency (the search starts at half the rate of back-to-back proofs, and a
relative bound is a multiple of it). Then rate steps: each sends its Poisson arrivals when they
are due, whatever the daemon is doing, and counts every latency from the due time (MLPerf's
server scenario). A step lasts about a sixth of the budget and has at least ``--cuzk-proofs``
arrivals; it holds when its p99 is within the bound (``bounds.Tail``), and stops sending once
it cannot hold any more. ``search.RateSearch`` picks the next rate.

A short step can hold a rate a little above what the daemon sustains: its backlog has not had
the time to grow past the bound. A longer budget gives longer steps and a sharper maximum.
"""

from __future__ import annotations

import math
from typing import Any

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.execution import Running
from pytest_cuzk.run.waves import ProofOutcome, Wave, check_wave, run_wave
from pytest_cuzk.scenarios.bounds import Budget, Tail
from pytest_cuzk.scenarios.idle import idle_p50, measure_idle
from pytest_cuzk.scenarios.records import RateStep, ServerFigures
from pytest_cuzk.scenarios.search import RateSearch, arrival_offsets

__all__ = ["STEPS_PER_BUDGET", "Server"]

STEPS_PER_BUDGET = 6  # a rate step lasts about this fraction of the scenario budget
START_UTILISATION = 0.5  # the first rate: half of what back-to-back idle proofs would give


class Server:
    """The rate search of one kind at one batch size on one daemon."""

    def __init__(self, case: Case, run: Running, settings: Settings, budget: Budget) -> None:
        self.case = case
        self.progress = run.progress
        self.runner = run.runner(case.kind)
        self.settings = settings
        self.budget = budget
        self.slo = settings.slo.get(case.kind.name) or run.backend.profile().slo(case.kind, None)
        self.proofs: list[ProofOutcome] = []
        self.stop_reason = ""
        self.idle_p50: float | None = None
        self.bound_s = 0.0
        self.search = RateSearch(1.0)  # replaced once the idle latency gives the first rate
        self.tried: list[tuple[float, bool]] = []  # (rate per hour, held), as the search sees them
        self.steps: list[RateStep] = []
        self.tails: list[Tail] = []

    def run(self) -> None:
        idle = measure_idle(self.runner, self.case, self.case.kind, self.settings)
        self.proofs += idle.proofs
        self.budget.spend(len(idle.proofs))
        self.idle_p50 = idle_p50(idle)
        if idle.failed or self.idle_p50 is None:
            self.stop_reason = "a proof failed"
            return
        self.bound_s = self.slo.bound(self.idle_p50)
        if self.idle_p50 > self.bound_s:
            self.stop_reason = f"idle, its p50 of {self.idle_p50:.3f} s is already over the bound"
            return
        self.search = search = RateSearch(START_UTILISATION * 3600 / self.idle_p50)
        tried = self.tried
        while (rate := search.next_rate(tried)) is not None:
            step_s = self.budget.seconds / STEPS_PER_BUDGET
            wanted = max(self.settings.proofs, math.ceil(rate / 3600 * step_s))
            count = max(self.settings.proofs, min(wanted, self.budget.proofs_left))  # at least the minimum
            offsets = arrival_offsets(count, rate)
            if why := self.budget.admit(offsets[-1] + self._drain_s(), count, least=not self.steps):
                self.stop_reason = why
                return
            step = self.step(rate, offsets)
            tried.append((rate, step.held))
            if any(not p.ok for p in self.proofs):
                self.stop_reason = "a proof failed"
                return
        self.stop_reason = search.why_done(tried)

    def _drain_s(self) -> float:
        """How long the next step may take past its last arrival: the last step's slowest proof, or idle."""
        slowest = self.steps[-1].latency_max_s if self.steps else None
        return slowest or self.idle_p50 or 0.0

    def step(self, rate: float, offsets: list[float]) -> RateStep:
        """Poisson arrivals at ``rate`` per hour; the step's verdict against the bound."""
        runner, kind, line = self.runner, self.case.kind, self.progress
        arrivals = f"{self.case.id}: {len(offsets)} arrivals at {rate:.1f}/h"
        requests = runner.requests(len(offsets), arrivals)  # built before the step: not in its time
        wave = Wave(requests, offsets=offsets, late_s=self.bound_s, late_allowed=len(offsets) // 100)
        if runner.mark is not None:
            runner.mark(f"{rate:.0f}/h")
        with line.stage(f"{self.case.id}: Poisson arrivals at {rate:.1f}/h"):
            runner.tick = lambda: line.tick(f"{len(offsets)} arrivals, bound {self.bound_s:.2f} s")
            run_wave(runner, kind, wave)
        outcomes = check_wave(runner, kind, wave)
        self.proofs += outcomes
        self.budget.spend(len(outcomes))
        tail = Tail.of(outcomes, self.bound_s, len(offsets))
        self.tails.append(tail)
        step = RateStep(
            rate_per_hour=round(rate, 3),
            planned=len(offsets),
            sent=len(outcomes),
            late=tail.late,
            held=tail.met,
            latency_p50_s=tail.percentile(50)[0],
            latency_p99_s=tail.p99,
            latency_max_s=tail.slowest,
            goodput_proofs_per_hour=tail.goodput_per_hour(wave.seconds),
            send_lag_max_s=round(max((r.send_lag_s for r in outcomes), default=0.0), 4),
        )
        self.steps.append(step)
        return step

    def figures(self, **shared: Any) -> ServerFigures:
        low, _ = self.search.bracket(self.tried)
        best = next((s for s, (r, _) in zip(self.steps, self.tried, strict=True) if r == low), None)
        reasons: dict[str, str] = dict(shared.pop("na_reasons"))
        if best is None:
            reasons["max_sustainable_rate_per_hour"] = "no rate tried held the bound"
        else:
            why = self.tails[self.steps.index(best)].percentile(99)[1]
            if why:
                reasons["latency_p99_s"] = f"{why} at that rate; the slowest of them held the bound"
        return ServerFigures(
            **shared,
            na_reasons=reasons,
            slo_s=round(self.bound_s, 4),
            slo=self.slo.describe(self.bound_s),
            idle_latency_p50_s=self.idle_p50,
            max_sustainable_rate_per_hour=best.rate_per_hour if best else None,
            goodput_proofs_per_hour=best.goodput_proofs_per_hour if best else None,
            latency_p50_s=best.latency_p50_s if best else None,
            latency_p99_s=best.latency_p99_s if best else None,
            latency_max_s=best.latency_max_s if best else None,
            rates=tuple(self.steps),
        )
