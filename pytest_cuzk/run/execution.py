"""Running one suite case against its daemon, then handing its figures to every sink.

Measure (the case's plan of waves, the daemon's process tree sampled), build the case's one
``Figures`` record, take a daemon that kept an uncancellable proof out of the run, shape
``extra_info`` through the plugin's hooks, and call ``pytest_cuzk_case_finished``; the
gates, last, may fail the test. ``running`` is the daemon's side of any measurement, the
load scenarios' too: one client, the sampler, and a death or a hang handed to the backend.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_cuzk.backends import fate
from pytest_cuzk.backends.protocol import DaemonBackend
from pytest_cuzk.config.settings import Settings
from pytest_cuzk.config.values import daemon_value
from pytest_cuzk.core import compat, transport
from pytest_cuzk.core.errors import CuzkWarning
from pytest_cuzk.core.outcome import first_line
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.plan import CaseClock, Plan, run_case
from pytest_cuzk.run.tally import case_figures
from pytest_cuzk.run.timeplan import PLUGIN, RunPlan
from pytest_cuzk.run.waves import CaseResult, Runner
from pytest_cuzk.vocab.kinds import ProofKindInfo

if TYPE_CHECKING:
    from pytest_cuzk.core.progress import ProgressLine
    from pytest_cuzk.daemon.statuspoll import StatusMemory
    from pytest_cuzk.data.testdata import TestData
    from pytest_cuzk.measure.figures import Figures
    from pytest_cuzk.measure.memory import MemoryReport
    from pytest_cuzk.measure.paired import PairedAB
    from pytest_cuzk.run.waves import ProofOutcome

__all__ = ["FINISHED_KEY", "CaseExecution", "CaseHost", "Execution", "Finished", "Running", "running"]

# What a finished test sends the controller with its call report: transport key -> value.
FINISHED_KEY = pytest.StashKey[dict[str, Any]]()


class CaseHost(Protocol):
    """What a measurement needs of the run's session (``CuzkSession`` is the one)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def progress(self) -> ProgressLine: ...

    def data(self, backend: DaemonBackend) -> TestData: ...

    def client(
        self, backend: DaemonBackend, rss_peak: Callable[[], int | None] = lambda: None
    ) -> ProvingClient: ...

    def ready(
        self, label: str | None = None, batch_size: int = 1, kinds: Sequence[str] | None = None
    ) -> DaemonBackend: ...

    def control_daemon(self) -> DaemonBackend | None:
        """The ``--cuzk-ab`` daemon the case is measured against in pairs; None without A/B."""


class Finished(Protocol):
    """A finished record, a case's figures or a scenario's: what the finish steps need of it."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass
class Execution:
    """What runs a suite test's measurement: the session, the test's daemon and item, pytest-benchmark."""

    session: CaseHost
    backend: DaemonBackend
    item: pytest.Item
    benchmark: Any | None

    def finish(self, case: Case, record: Finished, key: str, proofs: list[ProofOutcome]) -> None:
        """The steps every finished case and scenario takes, before its own sinks' hook.

        A daemon left with a proof it could not cancel is taken out of the run; the record is
        sent to the controller under ``key``; ``extra_info`` is shaped through the plugin's hooks
        and handed to pytest-benchmark.
        """
        if any(p.timed_out for p in proofs):
            self.backend.take_out(f"a {case.kind.name} proof timed out in {self.item.name}")
        self.item.stash.setdefault(FINISHED_KEY, {})[key] = record.to_dict()
        hook = self.item.config.hook
        extra = hook.pytest_cuzk_generate_extra_info(item=self.item, figures=record)
        hook.pytest_cuzk_update_extra_info(item=self.item, figures=record, extra_info=extra)
        if self.benchmark is not None:
            self.benchmark.extra_info.update(extra)


class CaseExecution(Execution):
    """The ``cuzk_run`` fixture's callable: run a case on ``backend`` for ``item``."""

    def __call__(self, case: Case) -> CaseResult:
        partial = CaseResult(case)
        try:
            result, paired = self.measure(case, partial)
        except Exception as exc:
            self._failed_part_way(case, partial, exc)
            raise
        errors = [p.error for p in result.failed]
        result.known_issue = self.backend.profile().known_issue(case.kind.name, case.batch_size, errors)
        figures: Figures = case_figures(result, self.item.name, self.backend.unsampled())
        if paired is not None:
            figures = dataclasses.replace(figures, ab=paired)
        for warning in figures.memory.idle_warnings() if figures.memory is not None else ():
            self.item.warn(CuzkWarning(f"{self.item.name}: {warning}"))
        self.finish(case, figures, transport.FIGURES, result.proofs)
        hook = self.item.config.hook
        hook.pytest_cuzk_case_finished(item=self.item, case=case, figures=figures, result=result)
        return result

    def _failed_part_way(self, case: Case, partial: CaseResult, error: Exception) -> None:
        """A case that failed part-way (its daemon died, a proof hung) still gets its row in the reports.

        Its figures are what it measured before the failure, marked with the error's first line;
        the sinks' hook is not called: gates and the results database take finished cases only.
        """
        figures = case_figures(partial, self.item.name, self.backend.unsampled())
        failed = dataclasses.replace(figures, failed=first_line(str(error), type(error).__name__))
        self.finish(case, failed, transport.FIGURES, partial.proofs)

    def _saving(self) -> bool:
        """Whether pytest-benchmark saves this run: then it is a baseline to come."""
        return compat.saving_as(self.item.config) is not None

    def _in_time(self, case: Case, plan: Plan) -> tuple[Plan, CaseClock | None]:
        """The case's plan within its share of the run budget; each trade and any overrun said first."""
        timeplan: RunPlan | None = self.item.config.pluginmanager.get_plugin(PLUGIN)
        nodeid = self.item.nodeid
        test = timeplan.test(nodeid) if timeplan is not None else None
        if timeplan is None or test is None:
            return plan, None
        plan, trades = timeplan.plan_for(test, plan)
        overrun = None if trades else timeplan.overrun(case, plan)  # a trade says what its minimum costs
        for said in (*trades, *([overrun] if overrun else [])):
            self.session.progress.say(f"cuzk: {case.id}: {said}")
        return plan, CaseClock(
            wave_s=timeplan.wave_cost(case),
            run_left=lambda: timeplan.left_s(after=nodeid),
            waves_done=lambda wave_s: timeplan.waves_done(case, wave_s),
        )

    def measure(self, case: Case, partial: CaseResult) -> tuple[CaseResult, PairedAB | None]:
        """Every proof of the case, with the daemon's memory sampled (or asked for) while they ran.

        ``partial`` holds what was measured when this raises (the candidate's alone under A/B).
        With ``--cuzk-ab`` the control daemon proves the case too, in windows interleaved with
        the candidate's, and the pair's record comes with the candidate's proofs.
        """
        plan = Plan.of(self.session.settings, saving=self._saving())
        control = self.session.control_daemon()
        if control is not None:
            from pytest_cuzk.run.ab import measure_pair

            return measure_pair(self.session, case, plan, self.backend, control, self.benchmark)
        plan, clock = self._in_time(case, plan)
        run: Running | None = None
        try:
            with running(self.session, self.backend, self.item.name) as run:
                result = run_case(case, run.runner(case.kind), plan, self.benchmark, partial, clock)
        finally:
            if run is not None:  # sampled up to the failure too
                partial.memory, partial.reported_memory = run.memory, run.reported
        return result, None


@dataclass
class Running:
    """A daemon being measured: one client, runners for its kinds, and what its sampling found."""

    client: ProvingClient
    backend: DaemonBackend
    data: TestData
    settings: Settings
    rss_peak: Callable[[], int | None]
    mark: Callable[[str], None] | None
    progress: ProgressLine
    memory: MemoryReport | None = None
    reported: StatusMemory | None = None

    def runner(self, kind: ProofKindInfo) -> Runner:
        """Fresh requests of ``kind``, checked with its verifier, through the one client."""
        s = self.settings
        return Runner(
            client=self.client,
            backend=self.backend,
            make_request=lambda: self.data.request(kind),
            proof_timeout_s=s.proof_timeout,
            probe_timeout_s=s.probe_timeout,
            verify=self.backend.profile().verifier(kind),
            mark=self.mark,
            rss_peak=self.rss_peak,
            progress=self.progress,
        )


@contextlib.contextmanager
def running(session: CaseHost, backend: DaemonBackend, what: str) -> Iterator[Running]:
    """Sample the daemon (or ask its /status) while the block proves; a death or a hang is the backend's.

    ``what`` names the block (the test) in the message of a daemon that failed in it.

    A hung daemon is killed or taken out, a dead one restarted or given up, before the error
    goes on to fail the test by name.
    """
    from pytest_cuzk.daemon.statuspoll import StatusPoller
    from pytest_cuzk.measure.memory import DaemonSampler

    s = session.settings
    pid = backend.pid
    sampler = DaemonSampler(pid, s.sample_interval) if pid else None
    status_page = daemon_value(s.status, backend.address) or backend.status_page
    poller = StatusPoller(status_page) if status_page else None
    rss_peak: Callable[[], int | None] = sampler.rss_peak_so_far if sampler else lambda: None
    with session.client(backend, rss_peak) as client:
        run = Running(
            client,
            backend,
            session.data(backend),
            s,
            rss_peak,
            sampler.mark if sampler else None,
            session.progress,
        )
        if sampler:
            sampler.start()
        if poller:
            poller.start()
        try:
            yield run
        except BaseException as exc:
            raise fate.settle(backend, exc, what, s.probe_timeout)  # noqa: B904
        finally:
            run.memory = sampler.stop() if sampler else None
            run.reported = poller.stop() if poller else None
