"""Running one suite case against its daemon, then handing its figures to every sink.

Measure (the case's plan of waves, the daemon's process tree sampled), build the case's one
``Figures`` record, take a daemon that kept an uncancellable proof out of the run, shape
``extra_info`` through the plugin's hooks, and call ``pytest_cuzk_case_finished``; the
gates, last, may fail the test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .backends.protocol import DaemonBackend
from .casefigures import case_figures
from .cases import Case
from .client import ProvingClient
from .errors import CuzkWarning, DaemonExited, DaemonHung, DaemonUnavailable
from .measure import Plan, run_case
from .runner import CaseResult, Runner
from .settings import daemon_value

if TYPE_CHECKING:
    from .session import CuzkSession

__all__ = ["CaseExecution"]


class CaseExecution:
    """The ``cuzk_run`` fixture's callable: run a case on ``backend`` for ``item``."""

    def __init__(
        self, session: CuzkSession, backend: DaemonBackend, item: pytest.Item, benchmark: Any | None
    ) -> None:
        self.session = session
        self.backend = backend
        self.item = item
        self.benchmark = benchmark

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

    def measure(self, case: Case) -> CaseResult:
        """Every proof of the case, with the daemon's memory sampled (or asked for) while they ran."""
        from .memory import DaemonSampler
        from .statuspoll import StatusPoller

        s = self.session.settings
        backend = self.backend
        data = self.session.data(backend)
        pid = backend.pid
        sampler = DaemonSampler(pid, s.sample_interval) if pid else None
        status = daemon_value(s.status, backend.address)
        poller = StatusPoller(status) if status else None
        with ProvingClient(backend.address, default_timeout=s.call_timeout) as client:
            runner = Runner(
                client=client,
                backend=backend,
                make_request=lambda: data.request(case.kind),
                proof_timeout_s=s.proof_timeout,
                probe_timeout_s=s.probe_timeout,
                verify=backend.profile().verifier(case.kind),
                mark=sampler.mark if sampler else None,
                rss_peak=sampler.rss_peak_so_far if sampler else lambda: None,
                status=self.session.status,
            )
            if sampler:
                sampler.start()
            if poller:
                poller.start()
            try:
                result = run_case(case, runner, Plan.of(s), self.benchmark)
            except DaemonHung as exc:
                backend.hung(str(exc))
                raise
            except (DaemonExited, DaemonUnavailable) as exc:
                backend.lost(str(exc))
                raise
            finally:
                memory = sampler.stop() if sampler else None
                reported = poller.stop() if poller else None
        result.memory, result.reported_memory = memory, reported
        return result
