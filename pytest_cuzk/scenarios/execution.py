"""Running a load scenario for its suite test, then handing its record to extra_info and the sinks.

The ``cuzk_scenario`` fixture's object. A scenario runs inside ``execution.running`` (one client,
the daemon sampled, a death or a hang reported by name and handed to the backend, as for
``test_prove``), within its ``Budget``, as one pytest-benchmark round (its figures are in
``extra_info``; the round's time is the scenario's). Then its record is built, a daemon left
with a proof it could not cancel is taken out of the run, and ``pytest_cuzk_scenario_finished``
reaches the sinks (the sweep's plot).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core import transport
from pytest_cuzk.core.outcome import as_outcome
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.execution import Execution, Running, running
from pytest_cuzk.run.waves import CaseResult, ProofOutcome
from pytest_cuzk.scenarios.bounds import Budget
from pytest_cuzk.scenarios.priority import Priority
from pytest_cuzk.scenarios.records import PriorityFigures, ScenarioFigures, ServerFigures, SweepFigures
from pytest_cuzk.scenarios.server import Server
from pytest_cuzk.scenarios.sweep import Sweep

__all__ = ["ScenarioExecution"]

_Record = TypeVar("_Record", bound=ScenarioFigures, covariant=True)


class _Scenario(Protocol[_Record]):
    proofs: list[ProofOutcome]
    stop_reason: str

    def run(self) -> None: ...

    def figures(self, **shared: Any) -> _Record: ...


class ScenarioExecution(Execution):
    """``cuzk_scenario``: each scenario, run against the case's daemon for ``item``."""

    def server(self, case: Case) -> ServerFigures:
        return self._run(case, Server)

    def priority(self, case: Case) -> PriorityFigures:
        return self._run(case, Priority)

    def sweep(self, case: Case) -> SweepFigures:
        return self._run(case, Sweep)

    def _run(
        self, case: Case, make: Callable[[Case, Running, Settings, Budget], _Scenario[_Record]]
    ) -> _Record:
        settings = self.session.settings
        with as_outcome(settings.allow_missing):
            start = time.monotonic()
            with running(self.session, self.backend, self.item.name) as run:
                scenario = make(case, run, settings, Budget(settings.scenario_budget, settings.max_proofs))
                if self.benchmark is not None:
                    self.benchmark.pedantic(scenario.run, rounds=1, iterations=1, warmup_rounds=0)
                else:
                    scenario.run()
            record = scenario.figures(**self._shared(case, scenario, run, time.monotonic() - start))
        self.finish(case, record, transport.SCENARIO, scenario.proofs)
        self.item.config.hook.pytest_cuzk_scenario_finished(item=self.item, case=case, figures=record)
        return record

    def _shared(self, case: Case, scenario: _Scenario[Any], run: Running, wall_s: float) -> dict[str, Any]:
        """The fields every scenario's record has."""
        proofs = scenario.proofs
        failed = [p for p in proofs if not p.ok]
        memory, unsampled = run.memory, self.backend.unsampled()
        known = self.backend.profile().known_issue(case.kind.name, case.batch_size, [p.error for p in failed])
        reasons = {} if memory is not None else {"rss_peak_bytes": unsampled or "not sampled"}
        return {
            "test": self.item.name,
            "label": case.label,
            "kind": case.kind.name,
            "batch_size": case.batch_size,
            "proofs_ok": len(proofs) - len(failed),
            "proofs_failed": len(failed),
            "wall_s": round(wall_s, 3),
            "stop_reason": scenario.stop_reason,
            "failures": tuple(f"{p.job_id}: {p.error}" for p in failed[:20]),
            "why_failed": CaseResult(case, proofs=proofs).why() if failed else "",
            "known_issue": known,
            "rss_peak_bytes": memory.rss_effective_peak_bytes if memory is not None else None,
            "na_reasons": reasons,
        }
