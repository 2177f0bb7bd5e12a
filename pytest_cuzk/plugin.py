"""pytest-cuzk's entry point: options, hook specs, the session plugin, fixtures and built-in hooks.

The plugin is inert until a test uses a ``cuzk_*`` fixture or a suite case is collected:
only then does the session choose the daemon (attach, spawn a cuzk binary, or the
reference engine), make the data present and run the readiness chain. pytest rewrites
every module of an installed plugin, anew each run where no bytecode is written (a
read-only site-packages, PYTHONDONTWRITEBYTECODE), so this module stays small and the
rest is imported only by a run that uses cuzk (an xdist controller also loads the small
transport module, to hear a usage error a worker's collection found).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_cuzk import hookspec
from pytest_cuzk.config.options import CASE_FIXTURES, add_options, requested, uses_cuzk

if TYPE_CHECKING:
    from pytest_cuzk.backends.choice import DaemonChoice
    from pytest_cuzk.backends.protocol import DaemonBackend
    from pytest_cuzk.backends.workspace import Workspace
    from pytest_cuzk.config.settings import Settings
    from pytest_cuzk.daemon.client import ProvingClient
    from pytest_cuzk.fixtures import CuzkData, DaemonInfo
    from pytest_cuzk.measure.figures import Figures
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult
    from pytest_cuzk.scenarios.execution import ScenarioExecution
    from pytest_cuzk.session import CuzkSession

__all__ = ["Dormant"]


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
    if config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput"):
        from pytest_cuzk.core.transport import UsageErrorRelay  # an xdist controller: a worker may hand one

        config.pluginmanager.register(UsageErrorRelay(), "cuzk_usage_error_relay")
    if not requested(config):  # inert: the session waits for a cuzk test that may never come
        config.pluginmanager.register(Dormant(config), "cuzk_dormant")
        return
    from pytest_cuzk.startup import start_session

    start_session(config)


def _session(config: pytest.Config) -> CuzkSession:
    from pytest_cuzk.startup import session_of

    return session_of(config)


class Dormant:
    """Stands in for the session in a run that set no cuzk option, and wakes it at the first cuzk test.

    The hook that wakes the session hands it the call; the session's own hooks take every later one.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if any(name in metafunc.fixturenames for name in CASE_FIXTURES):
            _session(self.config).pytest_generate_tests(metafunc)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if any(uses_cuzk(item) for item in items):
            _session(self.config).pytest_collection_modifyitems(items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Under xdist the controller collects nothing: a worker's cuzk report wakes it."""
        from pytest_cuzk.core.transport import carries_cuzk

        if carries_cuzk(report):
            _session(self.config).pytest_runtest_logreport(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from pytest_cuzk.core.transport import sent_totals

        if sent_totals(getattr(node, "workeroutput", {})) is not None:
            _session(self.config).pytest_testnodedown(node, error)


@pytest.hookimpl(trylast=True)
def pytest_cuzk_make_backends(
    config: pytest.Config, settings: Settings, workspace: Workspace
) -> DaemonChoice:
    from pytest_cuzk.backends.choice import choose

    return choose(settings, workspace)


@pytest.hookimpl(trylast=True)
def pytest_cuzk_generate_extra_info(item: pytest.Item, figures: Figures) -> dict[str, Any]:
    return figures.to_dict()


# --- fixtures (their work is in fixtures.py) -------------------------------------------------------
@pytest.fixture(scope="session")
def cuzk_session(pytestconfig: pytest.Config) -> CuzkSession:
    """The run's pytest-cuzk session: settings, daemons, data."""
    return _session(pytestconfig)


@pytest.fixture(scope="session")
def cuzk_data(cuzk_session: CuzkSession) -> CuzkData:
    """Test data for the daemon under test (downloaded or generated on first use)."""
    from pytest_cuzk.fixtures import CuzkData

    return CuzkData(cuzk_session)


@pytest.fixture
def cuzk_daemon(cuzk_session: CuzkSession, request: pytest.FixtureRequest) -> DaemonInfo:
    """The daemon under test (started, or attached to), answering GetStatus."""
    from pytest_cuzk.fixtures import started

    return started(cuzk_session, request.node)


@pytest.fixture
def cuzk_client(cuzk_session: CuzkSession, cuzk_daemon: DaemonInfo) -> Generator[ProvingClient, None, None]:
    """A gRPC client of the daemon under test: calls bounded by --cuzk-proof-timeout, and watched.

    A call the daemon dies or stops in fails within a poll, named so.
    """
    with cuzk_session.client(cuzk_session.backend(cuzk_daemon.label)) as client:
        yield client


@pytest.fixture
def cuzk_ready(
    cuzk_session: CuzkSession, cuzk_daemon: DaemonInfo, request: pytest.FixtureRequest
) -> DaemonBackend:
    """The daemon after the readiness chain: SRS loaded and warmed up.

    For the kinds of the test's ``@pytest.mark.cuzk_kinds(...)``, else every selected kind.
    """
    from pytest_cuzk.fixtures import ready

    return ready(cuzk_session, cuzk_daemon, request.node)


@pytest.fixture
def cuzk_target(cuzk_session: CuzkSession, request: pytest.FixtureRequest) -> DaemonBackend:
    """The ready daemon for this test's case (restarted for its batch size when spawned)."""
    from pytest_cuzk.fixtures import target

    return target(cuzk_session, request.node)


@pytest.fixture
def cuzk_run(
    cuzk_session: CuzkSession, cuzk_target: DaemonBackend, request: pytest.FixtureRequest
) -> Callable[[Case], CaseResult]:
    """Run a suite case against its daemon: proofs in waves, memory sampled, sinks fed, gates applied."""
    from pytest_cuzk.fixtures import case_runner

    return case_runner(cuzk_session, cuzk_target, request.node, _benchmark(request))


@pytest.fixture
def cuzk_scenario(
    cuzk_session: CuzkSession, cuzk_target: DaemonBackend, request: pytest.FixtureRequest
) -> ScenarioExecution:
    """Run a load scenario of the case against its daemon: ``.server(case)``, ``.priority``, ``.sweep``."""
    from pytest_cuzk.fixtures import scenario_runner

    return scenario_runner(cuzk_session, cuzk_target, request.node, _benchmark(request))


def _benchmark(request: pytest.FixtureRequest) -> Any | None:
    """pytest-benchmark's fixture, where it is installed: each wave (a scenario) is one of its rounds."""
    from pytest_cuzk.core.compat import BENCHMARK_PLUGIN

    if not request.config.pluginmanager.hasplugin(BENCHMARK_PLUGIN):
        return None
    return request.getfixturevalue("benchmark")
