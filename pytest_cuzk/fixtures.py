"""What the fixtures hand a test: the daemon it talks to, test data for its own requests, a case runner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_cuzk.backends.protocol import LOG_MARK_KEY
from pytest_cuzk.core.outcome import as_outcome
from pytest_cuzk.run.cases import item_case
from pytest_cuzk.vocab.kinds import KINDS, by_name

if TYPE_CHECKING:
    from pytest_cuzk.backends.protocol import DaemonBackend
    from pytest_cuzk.proto import pb
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult
    from pytest_cuzk.scenarios.execution import ScenarioExecution
    from pytest_cuzk.session import CuzkSession

__all__ = ["CuzkData", "DaemonInfo", "case_runner", "ready", "scenario_runner", "started", "target"]


@dataclass(frozen=True)
class DaemonInfo:
    """The daemon a test talks to. ``pid`` is None where no process can be sampled (a remote daemon)."""

    address: str
    pid: int | None
    mode: str
    label: str
    log_path: Path | None
    config_path: Path | None


class CuzkData:
    """Test data for users' own tests: the file of a kind and fresh requests built from it."""

    def __init__(self, session: CuzkSession) -> None:
        self._session = session

    def path(self, kind: str) -> Path:
        """The data file for ``kind``; the test cannot run without it (see ``as_outcome``)."""
        with as_outcome(self._session.settings.allow_missing):
            return self._session.data(self._session.backend()).path(KINDS[kind])

    def request(self, kind: str, request_id: str | None = None) -> pb.SubmitProofRequest:
        """A ``SubmitProofRequest`` for one proof of ``kind`` with a unique request id."""
        with as_outcome(self._session.settings.allow_missing):
            return self._session.data(self._session.backend()).request(KINDS[kind], request_id)


def _mark_log(item: pytest.Item, backend: DaemonBackend) -> None:
    """Remember where the daemon's log stands, so a failing test gets the lines written since."""
    log = backend.log
    item.stash[LOG_MARK_KEY] = (backend, log, log.log_size() if log is not None else 0)


def started(session: CuzkSession, item: pytest.Item) -> DaemonInfo:
    """``cuzk_daemon``: the first daemon, started or attached to, answering GetStatus."""
    with as_outcome(session.settings.allow_missing):
        _mark_log(item, session.backend())
        backend = session.started()
    _mark_log(item, backend)
    log = backend.log
    return DaemonInfo(
        backend.address,
        backend.pid,
        backend.mode,
        backend.label,
        log.log_path if log is not None else None,
        log.config_path if log is not None else None,
    )


def ready(session: CuzkSession, daemon: DaemonInfo, item: pytest.Item) -> DaemonBackend:
    """``cuzk_ready``: the daemon warmed up for the item's ``cuzk_kinds``, else every selected kind."""
    marker = item.get_closest_marker("cuzk_kinds")
    kinds = [by_name(k).name for k in marker.args] if marker else None
    with as_outcome(session.settings.allow_missing):
        return session.ready(daemon.label, kinds=kinds)


def target(session: CuzkSession, item: pytest.Item) -> DaemonBackend:
    """``cuzk_target``: the ready daemon of the item's case, restarted for its batch size when spawned."""
    case = item_case(item)
    assert case is not None, "cuzk_target serves the suite's parametrized cases"
    with as_outcome(session.settings.allow_missing):
        _mark_log(item, session.backend(case.label))
        backend = session.started(case.label, case.batch_size)
        _mark_log(item, backend)  # a failure getting ready shows the warm-up's lines
        for kind in case.kinds:
            session.data(backend).path(kind)  # DataUnavailable says what is missing and how to get it
        backend = session.ready(case.label, case.batch_size, [k.name for k in case.kinds])
    _mark_log(item, backend)
    return backend


def case_runner(
    session: CuzkSession, backend: DaemonBackend, item: pytest.Item, benchmark: Any | None
) -> Callable[[Case], CaseResult]:
    """``cuzk_run``: proofs in waves, memory sampled, sinks fed, gates applied."""
    from pytest_cuzk.run.execution import CaseExecution

    execution = CaseExecution(session, backend, item, benchmark)

    def run(case: Case) -> CaseResult:
        with as_outcome(session.settings.allow_missing):
            return execution(case)

    return run


def scenario_runner(
    session: CuzkSession, backend: DaemonBackend, item: pytest.Item, benchmark: Any | None
) -> ScenarioExecution:
    """``cuzk_scenario``: the load scenarios, each bounded by its budget, run against the case's daemon."""
    from pytest_cuzk.scenarios.execution import ScenarioExecution

    return ScenarioExecution(session, backend, item, benchmark)
