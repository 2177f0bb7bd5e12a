"""The run planned in time: what a proof costs on this host, how long each case and the run will take.

After the warm-up the run knows what one proof of each kind costs here (the warm-up proof), and
each finished wave refines it. ``RunPlan`` turns that into an estimate for every selected test
(a case measures ``expected_waves`` of its plan; any other cuzk test is counted as one proof, a
load scenario as its budget) and for the restarts a batch size needs (each at what the last start
of that daemon cost: SRS, warm-up proof and PCE). With ``--cuzk-run-budget`` it divides what is
left of the budget among the cases still to run, each time one starts, so that time a case did
not use goes to the next: a case's budget shrinks to its share, and when even its minimum proofs
overrun that share its minimum is lowered, down to ``FLOOR_WAVES`` waves (the fewest that give
its throughput an interval). Every trade is said before the case starts.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from pytest_cuzk.config.options import uses_cuzk
from pytest_cuzk.core import compat
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.run.cases import Case, item_case
from pytest_cuzk.run.plan import PRECISION_BUDGETS, Plan
from pytest_cuzk.vocab.units import plural, rough_duration

if TYPE_CHECKING:
    from pytest_cuzk.backends.protocol import ColdStart
    from pytest_cuzk.config.settings import Settings

_SCENARIO_FIXTURES = ("cuzk_server_case", "cuzk_sweep_case", "cuzk_priority_case")

__all__ = ["FLOOR_WAVES", "PLUGIN", "PlannedTest", "RunPlan"]

PLUGIN = "cuzk_timeplan"  # the name the run's plan is registered under

FLOOR_WAVES = 3
"""Fewest waves a case is cut down to: three windows give its throughput a 95% interval."""


@dataclass(frozen=True)
class PlannedTest:
    """One selected cuzk test as the plan sees it: its case, whether it is a measured one, and its extra."""

    nodeid: str
    case: Case | None  # the daemon and kind it proves on, None for a test of no case
    measured: bool  # a ``test_prove`` case, measured by its plan (else: one proof, or a scenario's budget)
    extra_s: float = 0.0  # a load scenario's budget


@dataclass(eq=False)  # a plugin: registered by identity
class RunPlan:
    """The selected tests, what proofs cost on this host so far, and the run budget's division."""

    tests: Sequence[PlannedTest]
    budget_s: float | None  # --cuzk-run-budget; None: the run has no budget
    base: Plan
    restarts: bool = True  # whether a batch size other than the daemon's restarts it
    ready_at: float | None = None  # when the first daemon was ready: the run's clock starts there
    proof_s: dict[str, float] = field(
        default_factory=dict
    )  # a kind's seconds per proof (warm-up, then waves)
    wave_s: dict[tuple[str, int, int], float] = field(
        default_factory=dict
    )  # (kind, batch, in flight) measured
    restart_s: float = 0.0  # what the last start cost (start, SRS, warm-up, PCE)
    done: set[str] = field(default_factory=set)
    batch: int | None = None  # the batch size the daemon runs with now
    _learnt: set[int] = field(default_factory=set)  # the cold starts learnt from

    @classmethod
    def register(
        cls,
        items: Sequence[pytest.Item],
        settings: Settings,
        config: pytest.Config,
        attached: Callable[[], bool],
    ) -> None:
        """Register the plan of the selected tests as a plugin (it hears each test finish).

        None when the run has no daemon (each test says why): there is nothing to plan.
        """
        try:
            plan = cls.of(items, settings, config, attached())
        except CuzkError:
            return
        config.pluginmanager.register(plan, PLUGIN)

    @classmethod
    def of(
        cls, items: Sequence[pytest.Item], settings: Settings, config: pytest.Config, attached: bool
    ) -> RunPlan:
        """The plan of the selected cuzk tests, in the order they run; an attached daemon never restarts."""
        tests = []
        for item in items:
            if not uses_cuzk(item):
                continue
            params = getattr(getattr(item, "callspec", None), "params", {})
            scenario = any(name in params for name in _SCENARIO_FIXTURES)
            extra = settings.scenario_budget if scenario else 0.0
            tests.append(PlannedTest(item.nodeid, item_case(item), "cuzk_case" in params, extra))
        base = Plan.of(settings, saving=compat.saving_as(config) is not None)
        return cls(tests, settings.run_budget, base, restarts=not attached)

    def test(self, nodeid: str) -> PlannedTest | None:
        return next((t for t in self.tests if t.nodeid == nodeid), None)

    # --- what the run learns ---------------------------------------------------------------------
    def learn(self, cold: ColdStart, batch_size: int, say: Callable[[str], None]) -> None:
        """A daemon warmed up: what its start and its proofs cost; the first time, the plan is said."""
        if id(cold) in self._learnt or not cold.warmup_s:
            return
        self._learnt.add(id(cold))
        cost = cold.start_s + sum(sum(d.values()) for d in (cold.srs_load_s, cold.warmup_s, cold.pce_s))
        if self.ready(cold.warmup_s, cost, batch_size):
            for line in self.lines():
                say(line)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.finished(nodeid)

    def ready(self, warmup_s: dict[str, float], start_s: float, batch_size: int) -> bool:
        """A daemon was (re)started and warmed up; True the first time (the run's clock starts now)."""
        first = self.ready_at is None
        if first:
            self.ready_at = time.monotonic()
        for kind, seconds in warmup_s.items():
            self.proof_s.setdefault(kind, seconds)
        if start_s > 0:
            self.restart_s = start_s
        self.batch = batch_size
        return first

    def waves_done(self, case: Case, wave_s: float) -> None:
        """A case's mean wave (timed and untimed): the cost of its shape, and of one proof of its kind."""
        self.wave_s[(case.kind.name, case.batch_size, case.in_flight)] = wave_s
        if case.batch_size == 1 and case.in_flight == 1:
            self.proof_s[case.kind.name] = wave_s

    def finished(self, nodeid: str) -> None:
        self.done.add(nodeid)

    # --- estimates ----------------------------------------------------------------------------
    def wave_cost(self, case: Case) -> float | None:
        """Seconds one wave of ``case`` takes: measured, else the kind's proof times the proofs in flight."""
        measured = self.wave_s.get((case.kind.name, case.batch_size, case.in_flight))
        if measured is not None:
            return measured
        per_proof = [self.proof_s[k.name] for k in case.kinds if k.name in self.proof_s]
        return max(per_proof) * case.in_flight if per_proof else None

    def estimate(self, test: PlannedTest, plan: Plan | None = None) -> float | None:
        """Seconds ``test`` takes, None while its kind's proofs are not yet timed."""
        case = test.case
        if case is None:
            return 0.0
        wave = self.wave_cost(case)
        if wave is None:
            return None
        if not test.measured:
            return wave / case.in_flight + test.extra_s
        waves = (plan or self.base).expected_waves(wave, case.in_flight)
        return waves * wave

    def _ahead(self, after: str | None) -> list[PlannedTest]:
        """The tests still to run, past ``after`` (the one running now) when given."""
        left = [t for t in self.tests if t.nodeid not in self.done]
        if after is not None:
            ids = [t.nodeid for t in left]
            left = left[ids.index(after) + 1 :] if after in ids else left
        return left

    def _restarts_ahead(self, tests: Sequence[PlannedTest]) -> int:
        if not self.restarts:
            return 0
        sizes = [t.case.batch_size for t in tests if t.case is not None]
        now = self.batch
        changes = 0
        for size in sizes:
            changes += now is not None and size != now
            now = size
        return changes

    def left_s(self, after: str | None = None) -> float | None:
        """Seconds the tests still to run take (past ``after``), restarts included; None when unknown."""
        ahead = self._ahead(after)
        estimates = [self.estimate(t, self.plan_for(t, self.base)[0] if t.measured else None) for t in ahead]
        if any(e is None for e in estimates):
            return None
        return sum(e for e in estimates if e is not None) + self._restarts_ahead(ahead) * self.restart_s

    # --- the budget's division ----------------------------------------------------------------
    def _floor_s(self, test: PlannedTest) -> float:
        """What a case costs at the fewest waves it is cut down to."""
        wave = self.wave_cost(test.case) if test.case is not None else None
        return FLOOR_WAVES * wave if wave is not None else 0.0

    def share(self, nodeid: str) -> float | None:
        """The seconds of the run budget this case may measure for: its floor, and an equal part of the rest.

        Every case left first gets its floor (``FLOOR_WAVES`` waves, more for two proofs in flight
        than for one), then what remains of the budget is divided equally.
        """
        if self.budget_s is None or self.ready_at is None:
            return None
        ahead = self._ahead(None)
        spent = time.monotonic() - self.ready_at
        fixed = [self.estimate(t) for t in ahead if not t.measured]
        left = (
            self.budget_s
            - spent
            - sum(e or 0.0 for e in fixed)
            - self._restarts_ahead(ahead) * self.restart_s
        )
        cases = [t for t in ahead if t.measured]
        floors = {t.nodeid: self._floor_s(t) for t in cases}
        spare = max(0.0, left - sum(floors.values())) / max(1, len(cases))
        return floors.get(nodeid, 0.0) + spare

    def plan_for(self, test: PlannedTest, plan: Plan) -> tuple[Plan, list[str]]:
        """The case's plan within its share of the run budget, and each trade made for it."""
        case, share = test.case, self.share(test.nodeid)
        wave = self.wave_cost(case) if case is not None else None
        natural = self.estimate(test, plan)
        if case is None or share is None or wave is None or natural is None or natural <= share:
            return plan, []
        budget = f"--cuzk-run-budget={self.budget_s:g}s"
        trades = []
        cut = round(share / PRECISION_BUDGETS if plan.precision else share, 1)
        if cut < plan.budget_s:
            trades.append(f"case budget {plan.budget_s:g} s -> {cut:.0f} s (its share of {budget})")
        least = max(1, math.ceil(plan.min_proofs / case.in_flight))
        fits = max(FLOOR_WAVES, math.floor(share / wave))
        min_proofs = plan.min_proofs
        if fits < least:
            min_proofs = fits * case.in_flight
            trades.append(
                f"minimum proofs {plan.min_proofs} -> {min_proofs} ({plural(fits, 'wave')} of "
                f"{rough_duration(wave)} fit its share {rough_duration(share)})"
            )
        if plan.precision:
            trades.append("the compare gate's precision may be out of reach within that share")
        changed = dataclasses.replace(
            plan,
            budget_s=min(plan.budget_s, cut),
            min_proofs=min_proofs,
            max_proofs=max(min_proofs, plan.max_proofs),
        )
        return changed, trades

    def overrun(self, case: Case, plan: Plan) -> str | None:
        """Said before a case starts whose minimum proofs will take longer than its budget."""
        wave = self.wave_cost(case)
        least = max(1, math.ceil(plan.min_proofs / case.in_flight))
        if wave is None or least * wave <= plan.budget_s:
            return None
        takes = rough_duration(least * wave)
        return (
            f"its minimum of {plural(plan.min_proofs, 'proof')} will take {takes} here, "
            f"{least * wave / plan.budget_s:.1f}x its {plan.budget_s:g} s budget: the minimum wins"
        )

    def lines(self) -> list[str]:
        """The plan as said after the warm-up: each kind's proof, each test's estimate, the run's."""
        costs = ", ".join(f"{kind} {rough_duration(s)}" for kind, s in sorted(self.proof_s.items()))
        total = self.left_s()
        budget = f" of the {rough_duration(self.budget_s)} run budget" if self.budget_s is not None else ""
        head = f"cuzk: a proof takes {costs} here (the warm-up)"
        if total is None:
            return [f"{head}; the run's length is not known yet"]
        ahead = self._ahead(None)
        restarts = self._restarts_ahead(ahead)
        again = f", {plural(restarts, 'restart')} at {rough_duration(self.restart_s)}" if restarts else ""
        lines = [f"{head}; the run will take {rough_duration(total)} ({total:.0f} s){budget}{again}"]
        for t in ahead:
            if t.measured and t.case is not None:
                plan, _ = self.plan_for(t, self.base)
                est = self.estimate(t, plan) or 0.0
                wave = self.wave_cost(t.case) or 0.0
                waves = plan.expected_waves(wave, t.case.in_flight) if wave else 0
                proofs = plural(waves * t.case.in_flight, "proof")
                lines.append(f"cuzk:   {t.case.id}: {rough_duration(est)} ({proofs})")
        others = sum(self.estimate(t) or 0.0 for t in ahead if not t.measured)
        if others:
            lines.append(
                f"cuzk:   other tests: {rough_duration(others)} (one proof each, a load scenario its budget)"
            )
        return lines
