"""The run report sink: one self-contained HTML page for the whole run (``--cuzk-html=PATH``).

Registered in every process. Where a case runs (an xdist worker, or the only process) it
adds the case's proof latencies to what the session sends with the call report;
on the controller it gathers every report and, at the end of the session, writes the page,
also when tests failed or the run was interrupted. The terminal summary says where it is.
"""

from __future__ import annotations

import datetime as dt
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_cuzk.core import transport
from pytest_cuzk.core.errors import CuzkWarning
from pytest_cuzk.html.outcomes import Outcomes
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.execution import FINISHED_KEY
from pytest_cuzk.vocab.files import atomic_write

if TYPE_CHECKING:
    from pytest_cuzk.measure.figures import Figures
    from pytest_cuzk.run.waves import CaseResult
    from pytest_cuzk.sinks.view import RunView

__all__ = ["RunReport"]

MAX_PROOFS = 2000  # latencies sent per case: a distribution, not an archive


class RunReport:
    """Collects what the page needs and writes it on the controller."""

    def __init__(self, config: pytest.Config, session: RunView, path: Path) -> None:
        if path.is_dir():
            raise pytest.UsageError(
                f"--cuzk-html {path} is a directory: give a file, e.g. {path / 'cuzk.html'}"
            )
        if not path.parent.is_dir():  # a typo must not grow a directory tree
            raise pytest.UsageError(
                f"--cuzk-html {path}: the directory {path.parent} does not exist; create it or fix the path"
            )
        self.config = config
        self.session = session
        self.path = path
        self.worker = hasattr(config, "workerinput")
        self.outcomes = Outcomes(config)
        self.started = dt.datetime.now(dt.timezone.utc)
        self._t0 = time.monotonic()
        self.written: Path | None = None
        self.error: str | None = None

    # --- where the case ran --------------------------------------------------------------------
    def pytest_cuzk_case_finished(
        self, item: pytest.Item, case: Case, figures: Figures, result: CaseResult
    ) -> None:
        """Send the case's proof latencies with its figures (the latency chart's points)."""
        proofs = [[round(p.latency_s, 4), p.ok] for p in result.proofs[:MAX_PROOFS]]
        item.stash.setdefault(FINISHED_KEY, {})[transport.PROOFS] = proofs

    # --- on the controller ---------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.outcomes.add(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.outcomes.add_collect_error(report)

    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage, nodeid: str) -> None:
        """The plugin's own warnings (a gate that could not be checked) are notes on the page."""
        if issubclass(warning_message.category, CuzkWarning):
            self.outcomes.warnings.append((nodeid, str(warning_message.message)))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.worker:
            return
        from pytest_cuzk.html.render import render
        from pytest_cuzk.html.runpage import run_page

        context = run_page(self.outcomes, self.session, self.started, time.monotonic() - self._t0, exitstatus)
        try:
            self.written = atomic_write(self.path, render("run.html.j2", **context))
        except OSError as exc:
            self.error = f"could not write the --cuzk-html report: {exc}"

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.written is not None:
            terminalreporter.write_line(f"cuzk HTML report: {self.written}")
        elif self.error is not None:
            terminalreporter.write_line(f"cuzk: {self.error}", red=True)
