"""Running one suite case against its daemon, then handing its figures to every sink.

Measure (the case's plan of waves, the daemon's process tree sampled), build the case's one
``Figures`` record, take a daemon that kept an uncancellable proof out of the run, shape
``extra_info`` through the plugin's hooks, and call ``pytest_cuzk_case_finished``; the
gates, last, may fail the test. ``running`` is the daemon's side of any measurement, the
load scenarios' too: one client, the sampler, and a death or a hang handed to the backend.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from .backends.protocol import DaemonBackend
from .casefigures import case_figures
from .cases import Case
from .client import ProvingClient
from .errors import CuzkWarning, DaemonExited, DaemonHung, DaemonUnavailable
from .measure import Plan, run_case
from .runner import CaseResult, Runner
from .settings import Settings, daemon_value
from .wire.kinds import ProofKindInfo

if TYPE_CHECKING:
    from .memory import MemoryReport
    from .progress import StatusLine
    from .session import CuzkSession
    from .statuspoll import StatusMemory
    from .testdata import TestData

__all__ = ["CaseExecution", "Execution", "Running", "running"]


@dataclass
class Execution:
    """What runs a suite test's measurement: the session, the test's daemon and item, pytest-benchmark."""

    session: CuzkSession
    backend: DaemonBackend
    item: pytest.Item
    benchmark: Any | None


class CaseExecution(Execution):
    """The ``cuzk_run`` fixture's callable: run a case on ``backend`` for ``item``."""

    def __call__(self, case: Case) -> CaseResult:
        from .session import FIGURES_KEY

        result = self.measure(case)
        errors = [p.error for p in result.failed]
        result.known_issue = self.backend.profile().known_issue(case.kind.name, case.batch_size, errors)
        if any(p.timed_out for p in result.proofs):
            self.backend.take_out(f"a {case.kind.name} proof timed out in {self.item.name}")
        figures = case_figures(result, self.item.name, self.backend.unsampled())
        for warning in figures.memory.idle_warnings() if figures.memory is not None else ():
            self.item.warn(CuzkWarning(f"{self.item.name}: {warning}"))
        self.item.stash[FIGURES_KEY] = figures
        hook = self.item.config.hook
        extra = hook.pytest_cuzk_generate_extra_info(item=self.item, figures=figures)
        hook.pytest_cuzk_update_extra_info(item=self.item, figures=figures, extra_info=extra)
        if self.benchmark is not None:
            self.benchmark.extra_info.update(extra)
        hook.pytest_cuzk_case_finished(item=self.item, case=case, figures=figures, result=result)
        return result

    def _saving(self) -> bool:
        """Whether pytest-benchmark saves this run: then it is a baseline to come."""
        options = self.item.config.option
        return bool(getattr(options, "benchmark_save", None) or getattr(options, "benchmark_autosave", None))

    def measure(self, case: Case) -> CaseResult:
        """Every proof of the case, with the daemon's memory sampled (or asked for) while they ran."""
        with running(self.session, self.backend) as run:
            plan = Plan.of(self.session.settings, saving=self._saving())
            result = run_case(case, run.runner(case.kind), plan, self.benchmark)
        result.memory, result.reported_memory = run.memory, run.reported
        return result


@dataclass
class Running:
    """A daemon being measured: one client, runners for its kinds, and what its sampling found."""

    client: ProvingClient
    backend: DaemonBackend
    data: TestData
    settings: Settings
    rss_peak: Callable[[], int | None]
    mark: Callable[[str], None] | None
    status: StatusLine
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
            status=self.status,
        )


@contextlib.contextmanager
def running(session: CuzkSession, backend: DaemonBackend) -> Iterator[Running]:
    """Sample the daemon (or ask its /status) while the block proves; a death or a hang is the backend's.

    A hung daemon is killed or taken out, a dead one restarted or given up, before the error
    goes on to fail the test by name.
    """
    from .memory import DaemonSampler
    from .statuspoll import StatusPoller

    s = session.settings
    pid = backend.pid
    sampler = DaemonSampler(pid, s.sample_interval) if pid else None
    status = daemon_value(s.status, backend.address)
    poller = StatusPoller(status) if status else None
    with ProvingClient(backend.address, default_timeout=s.call_timeout) as client:
        run = Running(
            client,
            backend,
            session.data(backend),
            s,
            sampler.rss_peak_so_far if sampler else lambda: None,
            sampler.mark if sampler else None,
            session.status,
        )
        if sampler:
            sampler.start()
        if poller:
            poller.start()
        try:
            yield run
        except DaemonHung as exc:
            backend.hung(str(exc))
            raise
        except (DaemonExited, DaemonUnavailable) as exc:
            backend.lost(str(exc))
            raise
        finally:
            run.memory = sampler.stop() if sampler else None
            run.reported = poller.stop() if poller else None
