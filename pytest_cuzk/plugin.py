"""pytest-cuzk's entry point: options, hook specs, the session plugin, fixtures and built-in hooks.

The plugin is inert until a test uses a ``cuzk_*`` fixture or a suite case is collected:
only then does the session choose the daemon (attach, spawn a cuzk binary, or the
reference engine), make the data present and run the readiness chain.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import hookspec
from .options import add_options, requested
from .session import LOG_MARK_KEY, CuzkSession

if TYPE_CHECKING:
    from .backends.choice import DaemonChoice
    from .backends.protocol import DaemonBackend
    from .backends.workspace import Workspace
    from .cases import Case
    from .client import ProvingClient
    from .figures import Figures
    from .proto import pb
    from .runner import CaseResult
    from .settings import Settings

__all__ = ["CUZK_SESSION", "SUITE", "CuzkData", "DaemonInfo"]

CUZK_SESSION = pytest.StashKey[CuzkSession]()
SUITE = "pytest_cuzk.suite"


@dataclass(frozen=True)
class DaemonInfo:
    """The daemon a test talks to. ``pid`` is None for an attached daemon."""

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
        from .outcome import as_outcome
        from .wire.kinds import KINDS

        with as_outcome(self._session.settings.allow_missing):
            found = self._session.data(self._session.backend()).path(KINDS[kind])
            if isinstance(found, Exception):
                raise found
            return found

    def request(self, kind: str, request_id: str | None = None) -> pb.SubmitProofRequest:
        """A ``SubmitProofRequest`` for one proof of ``kind`` with a unique request id."""
        from .outcome import as_outcome
        from .wire.kinds import KINDS

        with as_outcome(self._session.settings.allow_missing):
            return self._session.data(self._session.backend()).request(KINDS[kind], request_id)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Build and register the session first: pytest-benchmark's configure asks for machine info."""
    config.addinivalue_line(
        "markers",
        "cuzk_kinds(*kinds): the proof kinds cuzk_ready warms up for this test (default: all selected)",
    )
    if not requested(config):  # inert: the settings wait for a cuzk fixture that may never come
        session = CuzkSession(config)
        config.stash[CUZK_SESSION] = session
        config.pluginmanager.register(session, "cuzk_session")
        return
    from .outcome import as_usage_error
    from .settings import check_paths, resolve_settings

    settings = resolve_settings(config)
    check_paths(settings)
    no_paths = config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR
    if config.option.cuzk_daemon is not None and no_paths:
        # A cuzk mode, and no test paths on the command line nor testpaths in the ini: the packaged suite.
        config.option.pyargs = True
        config.args = [SUITE]
    session = CuzkSession(config, settings)
    config.stash[CUZK_SESSION] = session
    config.pluginmanager.register(session, "cuzk_session")
    if settings.gates_asked:
        from .gates import Gates

        with as_usage_error():
            config.pluginmanager.register(Gates(config, settings), "cuzk_gates")
    if settings.manifest is not None:
        from .manifest import load_manifest

        with as_usage_error():
            load_manifest(settings.manifest)
    if settings.plots:
        from .plots import Plotter

        config.pluginmanager.register(Plotter(settings.plots), "cuzk_plots")
    if settings.html:
        from .html.run import RunReport

        config.pluginmanager.register(RunReport(config, session, settings.html), "cuzk_html")
    if settings.results_db:
        from .recording import Recorder

        recorder = Recorder(settings, session.worker, session.backend)
        config.pluginmanager.register(recorder, "cuzk_recorder")


@pytest.hookimpl(trylast=True)
def pytest_cuzk_make_backends(
    config: pytest.Config, settings: Settings, workspace: Workspace
) -> DaemonChoice:
    from .backends.choice import choose

    return choose(settings, workspace)


@pytest.hookimpl(trylast=True)
def pytest_cuzk_generate_extra_info(item: pytest.Item, figures: Figures) -> dict[str, Any]:
    return figures.to_dict()


# --- fixtures ---------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def cuzk_session(pytestconfig: pytest.Config) -> CuzkSession:
    """The run's pytest-cuzk session: settings, daemons, data."""
    return pytestconfig.stash[CUZK_SESSION]


@pytest.fixture(scope="session")
def cuzk_data(cuzk_session: CuzkSession) -> CuzkData:
    """Test data for the daemon under test (downloaded or generated on first use)."""
    return CuzkData(cuzk_session)


def _mark_log(item: pytest.Item, backend: DaemonBackend) -> None:
    """Remember where the daemon's log stands, so a failing test gets the lines written since."""
    log = backend.log
    item.stash[LOG_MARK_KEY] = (backend, log, log.log_size() if log is not None else 0)


@pytest.fixture
def cuzk_daemon(cuzk_session: CuzkSession, request: pytest.FixtureRequest) -> DaemonInfo:
    """The daemon under test (started, or attached to), answering GetStatus."""
    from .outcome import as_outcome

    with as_outcome(cuzk_session.settings.allow_missing):
        _mark_log(request.node, cuzk_session.backend())
        backend = cuzk_session.started()
    _mark_log(request.node, backend)
    log = backend.log
    return DaemonInfo(
        backend.address,
        backend.pid,
        backend.mode,
        backend.label,
        log.log_path if log is not None else None,
        log.config_path if log is not None else None,
    )


@pytest.fixture
def cuzk_client(cuzk_session: CuzkSession, cuzk_daemon: DaemonInfo) -> Generator[ProvingClient, None, None]:
    """A gRPC client connected to the daemon under test; calls are bounded by --cuzk-proof-timeout."""
    from .client import ProvingClient

    with ProvingClient(cuzk_daemon.address, default_timeout=cuzk_session.settings.call_timeout) as client:
        yield client


@pytest.fixture
def cuzk_ready(
    cuzk_session: CuzkSession, cuzk_daemon: DaemonInfo, request: pytest.FixtureRequest
) -> DaemonBackend:
    """The daemon after the readiness chain: SRS loaded and warmed up.

    For the kinds of the test's ``@pytest.mark.cuzk_kinds(...)``, else every selected kind.
    """
    from .outcome import as_outcome
    from .wire.kinds import by_name

    marker = request.node.get_closest_marker("cuzk_kinds")
    kinds = [by_name(k).name for k in marker.args] if marker else None
    with as_outcome(cuzk_session.settings.allow_missing):
        return cuzk_session.ready(cuzk_daemon.label, kinds=kinds)


@pytest.fixture
def cuzk_target(cuzk_session: CuzkSession, request: pytest.FixtureRequest) -> DaemonBackend:
    """The ready daemon for this test's case (restarted for its batch size when spawned)."""
    from .outcome import as_outcome

    params = request.node.callspec.params
    case: Case = params.get("cuzk_case") or params["cuzk_kind"]
    with as_outcome(cuzk_session.settings.allow_missing):
        _mark_log(request.node, cuzk_session.backend(case.label))
        backend = cuzk_session.started(case.label, case.batch_size)
        found = cuzk_session.data(backend).path(case.kind)
        if isinstance(found, Exception):
            raise found
        backend = cuzk_session.ready(case.label, case.batch_size, [case.kind.name])
    _mark_log(request.node, backend)
    return backend


@pytest.fixture
def cuzk_run(
    cuzk_session: CuzkSession, cuzk_target: DaemonBackend, request: pytest.FixtureRequest
) -> Callable[[Case], CaseResult]:
    """Run a suite case against its daemon: proofs in waves, memory sampled, sinks fed, gates applied."""
    from .execution import CaseExecution
    from .outcome import as_outcome

    benchmark = (
        request.getfixturevalue("benchmark") if request.config.pluginmanager.hasplugin("benchmark") else None
    )
    execution = CaseExecution(cuzk_session, cuzk_target, request.node, benchmark)

    def run(case: Case) -> CaseResult:
        with as_outcome(cuzk_session.settings.allow_missing):
            return execution(case)

    return run
