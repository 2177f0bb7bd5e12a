"""Running one suite case against its daemon, then handing its figures to every sink.

Measure (proofs in waves, the daemon's process tree sampled), build the case's one
``Figures`` record, take a daemon that kept an uncancellable proof out of the run, shape
``extra_info`` through the plugin's hooks, and call ``pytest_cuzk_case_finished``; the
gates, last, may fail the test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .backends.protocol import DaemonBackend
from .cases import Case
from .client import ProvingClient
from .errors import DaemonExited, DaemonHung, DaemonUnavailable
from .runner import CaseResult, Runner, run_case

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
        figures = result.figures(self.item.name)
        self.item.stash[FIGURES_KEY] = figures
        hook = self.item.config.hook
        extra = hook.pytest_cuzk_generate_extra_info(item=self.item, figures=figures)
        hook.pytest_cuzk_update_extra_info(item=self.item, figures=figures, extra_info=extra)
        if self.benchmark is not None:
            self.benchmark.extra_info.update(extra)
        hook.pytest_cuzk_case_finished(item=self.item, case=case, figures=figures, result=result)
        return result

    def measure(self, case: Case) -> CaseResult:
        """Every proof of the case, with the daemon's memory sampled while they ran."""
        from .memory import DaemonSampler

        s = self.session.settings
        backend = self.backend
        data = self.session.data(backend)
        sampler = DaemonSampler(backend.pid, s.sample_interval) if backend.pid else None
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
            try:
                result = run_case(case, runner, s.proofs, self.benchmark)
            except DaemonHung as exc:
                backend.hung(str(exc))
                raise
            except (DaemonExited, DaemonUnavailable) as exc:
                backend.lost(str(exc))
                raise
            finally:
                memory = sampler.stop() if sampler else None
        result.memory = memory
        return result
