"""The run report sink: one self-contained HTML page for the whole run (``--cuzk-html=PATH``).

Registered in every process. Where a case runs (an xdist worker, or the only process) it
sends the case's proof latencies on with the call report, as the session sends the figures;
on the controller it gathers every report and, at the end of the session, writes the page,
also when tests failed or the run was interrupted. The terminal summary says where it is.
"""

from __future__ import annotations

import datetime as dt
import time
import warnings
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..cases import Case
from ..errors import CuzkWarning
from ..wire.files import atomic_write
from .outcomes import CASE_PROPERTY, PROOFS_PROPERTY, Outcomes

if TYPE_CHECKING:
    from ..figures import Figures
    from ..runner import CaseResult
    from ..session import CuzkSession

__all__ = ["RunReport"]

PROOFS_KEY = pytest.StashKey[list[list[Any]]]()
MAX_PROOFS = 2000  # latencies sent per case: a distribution, not an archive


class RunReport:
    """Collects what the page needs and writes it on the controller."""

    def __init__(self, config: pytest.Config, session: CuzkSession, path: Path) -> None:
        if path.is_dir():
            raise pytest.UsageError(
                f"--cuzk-html {path} is a directory: give a file, e.g. {path / 'cuzk.html'}"
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
        item.stash[PROOFS_KEY] = [[round(p.wall_s, 4), p.ok] for p in result.proofs[:MAX_PROOFS]]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Say which suite case a test is (also one that never ran), and send its proof latencies."""
        report = yield
        callspec = getattr(item, "callspec", None)  # a suite case, not a per-kind check
        case = callspec.params.get("cuzk_case") if callspec is not None else None
        if report.when == "setup" and isinstance(case, Case):
            facts = {"label": case.label, "kind": case.kind.name, "batch_size": case.batch_size}
            report.user_properties.append((CASE_PROPERTY, facts | {"concurrency": case.concurrency}))
        proofs = item.stash.get(PROOFS_KEY, None)
        if report.when == "call" and proofs is not None:
            report.user_properties.append((PROOFS_PROPERTY, proofs))
        return report

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
        from .render import render
        from .runpage import run_page

        context = run_page(self.outcomes, self.session, self.started, time.monotonic() - self._t0, exitstatus)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.written = atomic_write(self.path, render("run.html.j2", **context))
        except OSError as exc:
            self.error = f"could not write the --cuzk-html report: {exc}"

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.written is not None:
            terminalreporter.write_line(f"cuzk HTML report: {self.written}")
        elif self.error is not None:
            terminalreporter.write_line(f"cuzk: {self.error}", red=True)
