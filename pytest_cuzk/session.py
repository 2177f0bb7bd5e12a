"""The run's pytest-cuzk session, registered as a plugin: its hooks are its methods.

``CuzkSession`` is built in ``pytest_configure`` (one per xdist worker and one on the
controller) and does nothing until a cuzk test or option asks: then it chooses the daemons
(``pytest_cuzk_make_backends``), and hands out ready ones through its collaborators: test
data per engine, the readiness chain, and the metric ledger. Figures of finished cases
travel to the controller in ``user_properties`` and the ledger in ``workeroutput``, so one
summary covers every worker.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

from pytest_cuzk.backends.workspace import Workspace
from pytest_cuzk.config.options import CASE_FIXTURES, uses_cuzk
from pytest_cuzk.core import compat, transport
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.core.outcome import as_usage_error
from pytest_cuzk.host.interrupts import Interrupts
from pytest_cuzk.vocab.units import plural

if TYPE_CHECKING:
    from pytest_cuzk.backends.choice import DaemonChoice
    from pytest_cuzk.backends.protocol import DaemonBackend
    from pytest_cuzk.backends.readiness import Readiness
    from pytest_cuzk.config.settings import Settings
    from pytest_cuzk.core.progress import ProgressLine
    from pytest_cuzk.daemon.client import ProvingClient
    from pytest_cuzk.data.testdata import TestData
    from pytest_cuzk.measure.figures import Figures
    from pytest_cuzk.measure.ledger import MetricLedger
    from pytest_cuzk.scenarios.records import ScenarioFigures
    from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["CuzkSession"]


class CuzkSession:
    """Daemons, data and readiness for one pytest process, and the hooks that report on them."""

    def __init__(self, config: pytest.Config, settings: Settings | None = None) -> None:
        """``settings`` when the run asked for cuzk; else they are resolved when first needed."""
        self.config = config
        self._settings = settings
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "master")
        self.workspace = Workspace()
        self.selected_kinds: set[str] | None = None  # None: every kind
        self.rows: list[Figures] = []
        self.scenarios: list[ScenarioFigures] = []
        self.colds: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        self.not_run: list[tuple[str, str]] = []  # (nodeid, why) of cuzk tests whose setup failed or skipped
        self.collected = False  # whether any collected test uses the plugin
        self.deselected: list[pytest.Item] = []  # by -k, -m, --deselect and the plugin: what the run left out
        self.known: list[tuple[str, str]] = []  # (nodeid, why) of cases failing with a known engine bug
        self.interrupted = False
        self._choice: DaemonChoice | None = None
        self._choice_failed: CuzkError | None = None  # raised again, not probed again, by each module
        self._data: dict[Path | None, TestData] = {}
        self._readiness: Readiness | None = None
        self._ledger: MetricLedger | None = None
        self._progress: ProgressLine | None = None
        self.interrupts = Interrupts(self.workspace.cleanup)  # installed when the session is registered

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from pytest_cuzk.config.settings import resolve_settings

            self._settings = resolve_settings(self.config)
        return self._settings

    # --- daemons ----------------------------------------------------------------------------------
    @property
    def choice(self) -> DaemonChoice:
        """The daemons under test, chosen on first use (``auto`` probes ``--cuzk-addr`` once)."""
        if self._choice is None and self._choice_failed is None:
            try:
                self._choice = self.config.hook.pytest_cuzk_make_backends(
                    config=self.config, settings=self.settings, workspace=self.workspace
                )
            except CuzkError as exc:
                self._choice_failed = exc
        if self._choice is None:
            raise self._choice_failed or AssertionError("the built-in pytest_cuzk_make_backends answers")
        return self._choice

    @property
    def backends(self) -> dict[str, DaemonBackend]:
        return {b.label: b for b in self.choice.backends}

    def backend(self, label: str | None = None) -> DaemonBackend:
        return {b.label: b for b in self.choice.every}[label] if label else self.choice.backends[0]

    def client(
        self, backend: DaemonBackend, rss_peak: Callable[[], int | None] = lambda: None
    ) -> ProvingClient:
        """A watched client: a daemon dead or stopped mid-call fails it within a poll, not at its deadline."""
        from pytest_cuzk.backends import fate
        from pytest_cuzk.daemon.client import ProvingClient

        def watch(what: str) -> None:
            fate.check(backend, what, rss_peak())

        return ProvingClient(backend.address, default_timeout=self.settings.call_timeout, watch=watch)

    def control_daemon(self) -> DaemonBackend | None:
        """The ``--cuzk-ab`` daemon, measured beside the candidate in each case; None without A/B."""
        return self.choice.control

    def data(self, backend: DaemonBackend) -> TestData:
        """The test data of the engine behind ``backend`` (shared by daemons with the same manifest)."""
        from pytest_cuzk.data.testdata import TestData

        manifest = backend.profile().manifest()
        if manifest not in self._data:
            self._data[manifest] = TestData(self.settings, manifest, self.progress)
        return self._data[manifest]

    def data_sets(self) -> list[TestData]:
        return list(self._data.values())

    @property
    def readiness(self) -> Readiness:
        if self._readiness is None:
            from pytest_cuzk.backends.readiness import Readiness

            self._readiness = Readiness(self.settings, lambda b, k: self.data(b).request(k), self.progress)
        return self._readiness

    @property
    def ledger(self) -> MetricLedger:
        if self._ledger is None:
            from pytest_cuzk.measure.ledger import MetricLedger

            self._ledger = MetricLedger()
        return self._ledger

    def wanted_kinds(self, backend: DaemonBackend, kinds: Sequence[str] | None = None) -> list[ProofKindInfo]:
        """The selected kinds (or ``kinds``) whose data can be had for ``backend``."""
        from pytest_cuzk.vocab.kinds import KINDS

        wanted = [KINDS[k] for k in (kinds or sorted(self.selected_kinds or KINDS))]
        data = self.data(backend)
        return [k for k in wanted if data.available(k)]

    def started(self, label: str | None = None, batch_size: int = 1) -> DaemonBackend:
        """A daemon that answers, configured for ``batch_size`` when the plugin spawns it."""
        backend = self.backend(label)
        backend.bring_up(batch_size, self.wanted_kinds(backend), self.readiness)
        self.ledger.observe(backend)
        return backend

    def ready(
        self, label: str | None = None, batch_size: int = 1, kinds: Sequence[str] | None = None
    ) -> DaemonBackend:
        """A daemon that answers, has the SRS of ``kinds`` loaded and is warmed up for them."""
        backend = self.started(label, batch_size)
        self.readiness(backend, self.wanted_kinds(backend, kinds), backend.state.cold[-1])
        if (timeplan := self.config.pluginmanager.get_plugin("cuzk_timeplan")) is not None:  # RunPlan
            timeplan.learn(backend.state.cold[-1], batch_size, self.progress.say)
        return backend

    @property
    def progress(self) -> ProgressLine:
        """The live line every wait shows on the terminal, written past pytest's capture."""
        if self._progress is None:
            from pytest_cuzk.core.progress import ProgressLine

            self._progress = ProgressLine(self._terminal)
        return self._progress

    @contextlib.contextmanager
    def _terminal(self) -> Iterator[IO[str]]:
        """The terminal at the start of a line: pytest's open line of a file's results is ended first."""
        capman = self.config.pluginmanager.getplugin("capturemanager")
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            if reporter is not None:
                reporter.ensure_newline()
            yield sys.stderr  # looked up here: while capture is off it is the terminal's

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Daemons chosen before collecting: a choice that fails is one usage error, not one per test."""
        if self.settings.requested:
            with as_usage_error():
                self.choice  # noqa: B018 - chosen now, or the run stops

    # --- collection -------------------------------------------------------------------------------
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        for name in CASE_FIXTURES:
            if name in metafunc.fixturenames:
                from pytest_cuzk.run.cases import case_params

                choice = self.choice
                labels = [b.label for b in choice.backends]
                params = case_params(labels, self.settings, name)
                metafunc.parametrize(name, params)

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        self.deselected.extend(items)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Check markers and that a case is kept to measure; group tests so a daemon restarts once a size."""
        self.collected = any(uses_cuzk(item) for item in items)
        if not self.collected and not any(uses_cuzk(item) for item in self.deselected):
            return  # nothing of cuzk here: not even its modules are loaded
        from pytest_cuzk.run.cases import order_items
        from pytest_cuzk.run.selection import marker_problems, nothing_measured, unasked_scenarios

        if bad := marker_problems(items):
            transport.stop_collection(self.config, items, "; ".join(bad))
            return
        if left_out := unasked_scenarios(self.config, self.settings.scenarios, items):
            self.config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if item not in left_out]
            self.notes.append(
                f"{plural(len(left_out), 'load scenario test')} of the suite not run: they take minutes; "
                "pass --cuzk-scenarios, or name them (-k test_server, test_priority or test_sweep)"
            )
        if why := nothing_measured(self.config, self.settings, items, self.deselected):
            transport.stop_collection(self.config, items, why)
        order_items(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Only the kinds the run selected (``-k porep``, ``cuzk_kinds`` markers) get preload and warm-up."""
        if not self.collected:
            return
        from pytest_cuzk.run.selection import selected_kinds
        from pytest_cuzk.run.timeplan import RunPlan

        if kinds := selected_kinds(session.items):
            self.selected_kinds = kinds
        RunPlan.register(session.items, self.settings, self.config, lambda: self.choice.attached)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Under xdist, attached daemons are never shared: each worker takes one daemon's tests."""
        if not self.asked or config.getvalue("dist") != "load" or not self.choice.attached:
            return None
        from pytest_cuzk.backends.scheduling import DaemonScheduling

        return DaemonScheduling(config, log, list(self.backends))

    # --- reporting --------------------------------------------------------------------------------
    @property
    def asked(self) -> bool:
        """Whether this run is about a daemon: a cuzk option is set, or a cuzk test made it choose one."""
        return self.settings.requested or self._choice is not None

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """Only a run that asked for cuzk hears of it (and only such a run probes for a daemon)."""
        if not self.settings.requested:
            return []
        from pytest_cuzk.sinks.terminal import header_lines

        return header_lines(self)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Attach the daemon log of a failing test, and carry each case's figures to the controller."""
        report = yield
        from pytest_cuzk.backends.protocol import LOG_MARK_KEY, log_section
        from pytest_cuzk.core.outcome import reason_line
        from pytest_cuzk.run.cases import item_case

        case = item_case(item)
        if case is not None:  # which suite case this is, also for one that never ran
            facts = {"label": case.label, "kind": case.kind.name, "batch_size": case.batch_size}
            transport.send(report, transport.CASE, facts | {"concurrency": case.concurrency})
        seen = item.stash.get(LOG_MARK_KEY, None)
        if seen is None:
            return report
        backend, log, offset = seen
        if report.failed or report.skipped:
            transport.send(report, transport.NOT_RUN, reason_line(report))
        shown = log or backend.log  # the daemon the test ran on, even when killed and replaced since
        if report.failed and shown is not None:
            since = offset if shown is log else 0
            section = log_section(shown, since, loud=self.config.get_verbosity() > 0)
            report.sections.append(("cuzk daemon log", section))
            self.workspace.keep = True  # keep the log the messages point to
        if report.when == "call" and call.excinfo is not None and backend.alive():
            from pytest_cuzk.backends import fate  # a timed-out or stopped call leaves it untrusted

            fate.settle(backend, call.excinfo.value, item.name, self.settings.probe_timeout)
        if report.when == "call":
            from pytest_cuzk.run.execution import FINISHED_KEY

            for owner in self.choice.every:  # the A/B control daemon's starts too (kept once, by key)
                for cold in owner.state.cold:
                    key = f"{self.worker}/{owner.label}/{cold.batch_size}/{cold.start_s}"
                    record = {"key": key, **cold.to_dict(), "restarts": list(owner.state.restarts)}
                    transport.send(report, transport.COLD, record)
            for key, value in item.stash.get(FINISHED_KEY, {}).items():
                transport.send(report, key, value)
        if report.when == "teardown":
            self.ledger.observe(backend)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect the figures every test (on any worker) reported, and what did not run and why."""
        for key, value in transport.received(report):
            if key == transport.NOT_RUN:
                self.not_run.append((report.nodeid, str(value)))
            elif key in (transport.FIGURES, transport.SCENARIO) and isinstance(value, dict):
                if key == transport.FIGURES:
                    from pytest_cuzk.measure.figures import Figures

                    self.rows.append(Figures.from_dict(value))
                else:
                    from pytest_cuzk.scenarios.records import scenario_from_dict

                    self.scenarios.append(scenario_from_dict(value))
                if getattr(report, "wasxfail", None):
                    self.known.append((report.nodeid, str(report.wasxfail)))
            elif key == transport.COLD and isinstance(value, dict):
                self.colds[value["key"]] = value

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A worker hands its counter totals to the controller."""
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None and self._ledger is not None:
            workeroutput[transport.METRIC_TOTALS] = self._ledger.to_wire()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Add a finished xdist worker's counter totals to the controller's."""
        totals = transport.sent_totals(getattr(node, "workeroutput", {}))
        if totals:
            self.ledger.merge_wire(totals)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not (self.rows or self.scenarios or self.colds or self.not_run):
            return
        from pytest_cuzk.sinks.terminal import summary_lines

        terminalreporter.write_sep("=", "cuzk proving summary")
        for line in summary_lines(self):
            terminalreporter.write_line(line)

    @pytest.hookimpl(optionalhook=True, wrapper=True)
    def pytest_benchmark_compare_machine_info(
        self, benchmarksession: Any, machine_info: dict[str, Any], compared_benchmark: dict[str, Any]
    ) -> Generator[None, object, object]:
        """Comparing two builds with the storage outside the working directory must not crash."""
        try:
            return (yield)
        except ValueError as exc:
            compat.machine_info_differs(
                benchmarksession, exc, machine_info, compared_benchmark["machine_info"]
            )
            return None

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_machine_info(
        self, config: pytest.Config, machine_info: dict[str, Any]
    ) -> None:
        """GPUs, driver, CUDA, host RAM/CPU and the daemon build: compared runs say which build is which."""
        if not self.asked:
            return
        from pytest_cuzk.host.info import host_info

        machine_info["cuzk"] = self.choice.machine_record(host_info().machine_dict())

    def pytest_keyboard_interrupt(self) -> None:
        """An interrupted run's database runs are left unfinished, as the database expects."""
        self.interrupted = True

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Stop every daemon the plugin started, each on its own, then remove the workspace."""
        if self._choice is not None:
            for backend in self._choice.every:
                try:
                    backend.stop()
                except Exception as exc:  # keep stopping the others
                    self.notes.append(f"could not stop daemon {backend.label}: {exc}")
        self.workspace.cleanup()
