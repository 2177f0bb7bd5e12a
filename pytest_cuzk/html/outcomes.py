"""What happened to each test, gathered on the controller from every worker's reports.

pytest's own ``pytest_report_teststatus`` names each report's outcome (passed, failed, error,
skipped, xfailed, xpassed), so the page says what the terminal says; a test's worst phase
decides. A suite case's figures and proof latencies arrive in the call report's
``user_properties``, which xdist carries from the worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_cuzk.core import transport
from pytest_cuzk.core.outcome import report_message
from pytest_cuzk.measure.figures import Figures
from pytest_cuzk.scenarios.records import ScenarioFigures, scenario_from_dict

__all__ = ["Outcomes", "TestEntry"]
_WORST = {"passed": 0, "skipped": 1, "xfailed": 2, "xpassed": 3, "failed": 4, "error": 5}
_REASON_CHARS = 4000


@dataclass
class TestEntry:
    """One test as the page shows it."""

    __test__ = False  # not a pytest test class despite the name

    nodeid: str
    outcome: str = ""
    phase: str = ""  # the phase whose report decided the outcome
    duration_s: float | None = None  # of the call phase, where it ran
    reason: str = ""
    log: str = ""
    case: dict[str, Any] | None = None  # label, kind, batch_size, concurrency
    figures: Figures | None = None
    scenario: ScenarioFigures | None = None
    proofs: list[tuple[float, bool]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.nodeid.rpartition("::")[2]

    @property
    def ran(self) -> bool:
        """Whether the test body ran to its end: a skip or an error in setup means it did not."""
        return not (self.outcome == "skipped" or (self.outcome == "error" and self.phase == "setup"))


def reason_of(report: pytest.TestReport) -> str:
    """Why a test did not pass: the skip or xfail reason, the exception line, or the failure text."""
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail) or "expected to fail"
    text = report_message(report)
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


class Outcomes:
    """Every test's entry, in the order their first report arrived, and what was never collected."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.tests: dict[str, TestEntry] = {}
        self.collect_errors: list[tuple[str, str]] = []
        self.warnings: list[tuple[str, str]] = []

    def add(self, report: pytest.TestReport) -> None:
        entry = self.tests.setdefault(report.nodeid, TestEntry(report.nodeid))
        if report.when == "call":
            entry.duration_s = report.duration
        for key, value in transport.received(report):
            if key == transport.CASE and isinstance(value, dict):
                entry.case = value
            elif key == transport.FIGURES and isinstance(value, dict):
                entry.figures = Figures.from_dict(value)
            elif key == transport.SCENARIO and isinstance(value, dict):
                entry.scenario = scenario_from_dict(value)
            elif key == transport.PROOFS and isinstance(value, list):
                entry.proofs = [(float(s), bool(ok)) for s, ok in value]
        category = self.config.hook.pytest_report_teststatus(report=report, config=self.config)[0]
        if category and _WORST.get(category, 0) >= _WORST.get(entry.outcome, -1):
            entry.outcome, entry.phase = category, report.when
            entry.reason = reason_of(report) if category != "passed" else ""
        entry.log = entry.log or next(
            (text for title, text in report.sections if title == "cuzk daemon log"), ""
        )

    def add_collect_error(self, report: pytest.CollectReport) -> None:
        crash = getattr(report.longrepr, "reprcrash", None)
        self.collect_errors.append(
            (report.nodeid or "(collection)", crash.message if crash else report.longreprtext)
        )

    def counts(self) -> dict[str, int]:
        """Tests per outcome, worst first, only outcomes that occurred."""
        found = [e.outcome for e in self.tests.values() if e.outcome]
        counts = {o: found.count(o) for o in sorted(_WORST, key=_WORST.__getitem__, reverse=True)}
        if self.collect_errors:
            counts["error"] += len(self.collect_errors)
        return {o: n for o, n in counts.items() if n}

    def entries(self) -> Sequence[TestEntry]:
        return [e for e in self.tests.values() if e.outcome]
