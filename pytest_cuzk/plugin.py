"""pytest-cuzk's hooks and fixtures.

The plugin is inert until a test uses a ``cuzk_*`` fixture: then the session
resolves the daemon (attach, spawn a cuzk binary, or the reference engine),
makes the data present and runs the readiness chain. The suite's parametrized
cases (kind × batch size × concurrency × daemon) come from ``pytest_generate_tests``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .bench import Case, CaseResult, Runner, run_case
from .client import ProvingClient, keep_large_buffers
from .daemon import DaemonExited, DaemonProcess
from .data import DataUnavailable, Progress, ProgressLine
from .errors import CuzkError, DaemonUnavailable
from .gates import baseline_mapping, check_gates
from .report import summary_lines
from .session import CuzkSession, Target
from .settings import add_options, resolve_settings
from .wire.addresses import is_local
from .wire.kinds import KINDS, ProofKindInfo

__all__ = ["CUZK_SESSION", "CuzkData", "CuzkWarning", "DaemonInfo"]

CUZK_SESSION = pytest.StashKey[CuzkSession]()


class CuzkWarning(pytest.PytestWarning):
    """Something pytest-cuzk could not check or measure, said without failing the test."""


_CASE_FIXTURES = ("cuzk_case", "cuzk_kind")
_LOG_OFFSET = pytest.StashKey[tuple[Target, "DaemonProcess | None", int]]()
_RESULT = pytest.StashKey[CaseResult]()
# logreport hooks get no config; the active session (innermost under pytester) is the last one.
_SESSIONS: list[CuzkSession] = []


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
        """The data file for ``kind``; skips the test with the reason when it cannot be had."""
        found = self._session.data(KINDS[kind].name)
        if isinstance(found, DataUnavailable):
            pytest.skip(str(found))
        return found

    def request(self, kind: str, request_id: str | None = None) -> Any:
        """A ``SubmitProofRequest`` for one proof of ``kind`` with a unique request id."""
        self.path(kind)
        return self._session.request(KINDS[kind], request_id)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Build the session first: pytest-benchmark's configure asks for machine info when comparing."""
    config.addinivalue_line(
        "markers",
        "cuzk_kinds(*kinds): the proof kinds cuzk_ready warms up for this test (default: all selected)",
    )
    session = CuzkSession(resolve_settings(config), os.environ.get("PYTEST_XDIST_WORKER", "master"))
    session.progress = _terminal_progress(config)
    keep_large_buffers()
    config.stash[CUZK_SESSION] = session
    _SESSIONS.append(session)


def _terminal_progress(config: pytest.Config) -> Progress:
    """Download progress on the terminal, even while pytest captures the fixture's output."""
    capman = config.pluginmanager.getplugin("capturemanager")
    line: ProgressLine | None = None

    def show(name: str, done: int, total: int | None) -> None:
        nonlocal line
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            line = line or ProgressLine()
            line(name, done, total)

    return show


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under xdist, attached daemons are never shared: each worker takes one daemon's tests.

    With several daemons, hosts prove in parallel; with one, its tests run on one
    worker (workers sharing a daemon would measure each other).
    """
    session = config.stash[CUZK_SESSION]
    if config.getvalue("dist") != "load" or session.resolve_mode().mode != "attach":
        return None
    from .fleet import DaemonScheduling

    return DaemonScheduling(config, log, session.labels)


def pytest_keyboard_interrupt() -> None:
    """An interrupted run's database runs are left unfinished, as the database expects."""
    for session in _SESSIONS:
        session.interrupted = True


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(CUZK_SESSION, None)
    if session is not None:
        session.close()
        if session in _SESSIONS:
            _SESSIONS.remove(session)


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash[CUZK_SESSION]
    s = session.settings
    try:
        choice = session.resolve_mode()
        lines = [f"cuzk: daemon mode {choice.mode} ({choice.reason})"]
    except CuzkError as exc:
        lines = [f"cuzk: no daemon: {exc}"]
    lines.append(
        f"cuzk: batch sizes {','.join(map(str, s.batch_sizes))}, concurrency "
        f"{','.join(map(str, s.concurrency))}, {s.proofs} proofs per case, "
        f"sampling every {s.sample_interval}s"
    )
    if config.pluginmanager.hasplugin("xdist") and getattr(config.option, "numprocesses", None):
        lines.append("cuzk: pytest-benchmark disables itself under xdist; pytest-cuzk's own figures are kept")
        if session.choice is not None and session.choice.mode != "attach":
            lines.append(
                "cuzk: each xdist worker spawns its own daemon, and they share this host's RAM and GPUs: "
                "measure with -n 0"
            )
    return lines


def _cases(session: CuzkSession, per_kind: bool) -> list[Any]:
    choice = session.resolve_mode()
    attached = choice.mode == "attach"
    show_label = len(session.labels) > 1 or bool(session.settings.labels)
    s = session.settings
    params = []
    for label in session.labels:
        for kind in KINDS.values():
            combos = [(1, 1)] if per_kind else [(b, j) for b in s.batch_sizes for j in s.concurrency]
            for b, j in combos:
                if b > 1 and not kind.batchable:
                    continue
                case = Case(label, kind, b, j, attached=attached and not per_kind, show_label=show_label)
                case_id = case.id if not per_kind else "-".join(([label] if show_label else []) + [kind.name])
                params.append(pytest.param(case, id=case_id))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name in _CASE_FIXTURES:
        if name in metafunc.fixturenames:
            session = metafunc.config.stash[CUZK_SESSION]
            metafunc.parametrize(name, _cases(session, per_kind=name == "cuzk_kind"))


def _item_case(item: pytest.Item) -> Case | None:
    callspec = getattr(item, "callspec", None)
    for name in _CASE_FIXTURES:
        if callspec is not None and name in callspec.params:
            return callspec.params[name]
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group cuzk tests by daemon and batch size so a spawned daemon restarts once per configuration."""
    slots = [i for i, item in enumerate(items) if _item_case(item) is not None]
    ordered = sorted(
        (items[i] for i in slots), key=lambda it: (_item_case(it).label, _item_case(it).batch_size)
    )  # type: ignore[union-attr]
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item


def pytest_collection_finish(session: pytest.Session) -> None:
    """Only the kinds the run selected (``-k porep``, ``cuzk_kinds`` markers) get SRS preload and warm-up."""
    kinds = {c.kind.name for c in (_item_case(i) for i in session.items) if c is not None}
    kinds |= {KINDS[k].name for i in session.items for m in i.iter_markers("cuzk_kinds") for k in m.args}
    if kinds:
        session.config.stash[CUZK_SESSION].selected_kinds = kinds


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Attach the daemon log of a failing test, and carry each case's figures to the controller.

    Figures travel in ``user_properties`` so that, under xdist, every worker's
    results reach the one summary table (and JUnit XML).
    """
    report = yield
    seen = item.stash.get(_LOG_OFFSET, None)
    if report.failed and seen is not None:
        target, process, offset = seen
        current = target.process or process
        if current is not None:
            since = offset if current is process else 0  # a restarted daemon has a new log
            report.sections.append(("cuzk daemon log", current.log_tail(60, since=since)))
            item.config.stash[CUZK_SESSION].keep_tmpdir = True  # keep the log the messages point to
    if report.when == "call" and seen is not None:
        target = seen[0]
        for cold in target.cold:
            key = f"{item.config.stash[CUZK_SESSION].worker}/{target.label}/{cold.batch_size}/{cold.start_s}"
            report.user_properties.append(
                ("cuzk_cold", {"key": key, **cold.as_dict(), "restarts": target.restarts})
            )
        result = item.stash.get(_RESULT, None)
        if result is not None:
            report.user_properties.append(("cuzk_result", (item.name, result.extra_info())))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect the figures every test (on any worker) reported."""
    if report.when != "call":
        return
    session = _SESSIONS[-1] if _SESSIONS else None
    if session is None:
        return
    for name, value in report.user_properties:
        if name == "cuzk_result":
            session.rows.append(tuple(value))
        elif name == "cuzk_cold":
            session.colds[value["key"]] = value


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Total the daemons' counters while they still run; a worker hands its totals to the controller."""
    cz = session.config.stash.get(CUZK_SESSION, None)
    if cz is None:
        return
    for target in cz.targets.values():
        cz.fold_metrics(target)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and cz.metric_totals:
        workeroutput["cuzk_metric_totals"] = {
            label: [
                [name, [list(pair) for pair in labels], value] for (name, labels), value in totals.items()
            ]
            for label, totals in cz.metric_totals.items()
        }


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """Add a finished xdist worker's counter totals to the controller's."""
    cz = node.config.stash.get(CUZK_SESSION, None)
    worker_totals = getattr(node, "workeroutput", {}).get("cuzk_metric_totals", {})
    if cz is None:
        return
    for label, rows in worker_totals.items():
        totals = cz.metric_totals.setdefault(label, {})
        for name, labels, value in rows:
            key = (name, tuple(tuple(pair) for pair in labels))
            totals[key] = totals.get(key, 0.0) + value


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(CUZK_SESSION, None)
    if session is None or not (session.rows or session.colds):
        return
    terminalreporter.write_sep("=", "cuzk proving summary")
    for line in summary_lines(session.rows, session.colds.values(), session):
        terminalreporter.write_line(line)


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """GPUs, driver, CUDA, host RAM/CPU and the daemon build, so compared runs say which build is which."""
    from .hostinfo import host_info

    session = config.stash[CUZK_SESSION]
    session.resolve_mode()
    remote = [t.address for t in session.targets.values() if t.mode == "attach" and not is_local(t.address)]
    machine_info["cuzk"] = {
        "host": host_info().as_dict(),
        "daemon": session.engine_identity(),
        # host describes where pytest ran; a remote daemon's hardware is not in it
        "remote_daemons": remote,
    }


# --- fixtures ---------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def cuzk_session(pytestconfig: pytest.Config) -> CuzkSession:
    """The run's pytest-cuzk session: settings, daemons, data."""
    return pytestconfig.stash[CUZK_SESSION]


@pytest.fixture(scope="session")
def cuzk_data(cuzk_session: CuzkSession) -> CuzkData:
    """Test data for the daemon under test (downloaded or generated on first use)."""
    return CuzkData(cuzk_session)


def _mark_log(item: pytest.Item, target: Target) -> None:
    """Remember where the daemon's log stands, so a failing test gets the lines written since."""
    process = target.process
    item.stash[_LOG_OFFSET] = (target, process, process.log_size() if process else 0)


def _bring_up(
    session: CuzkSession, label: str | None = None, batch_size: int = 1, kinds: list[str] | None = None
) -> Target:
    """A started daemon (``kinds`` None), or a ready one for ``kinds``; a gone attached daemon skips."""
    try:
        target = (
            session.started(label, batch_size) if kinds is None else session.ready(label, batch_size, kinds)
        )
    except DaemonExited as exc:
        if session.resolve_mode().mode == "attach":
            pytest.skip(str(exc))
        raise
    session.watch_metrics(target)
    return target


@pytest.fixture
def cuzk_daemon(cuzk_session: CuzkSession, request: pytest.FixtureRequest) -> DaemonInfo:
    """The daemon under test (started, or attached to), answering GetStatus."""
    _mark_log(request.node, cuzk_session.target())
    target = _bring_up(cuzk_session)
    _mark_log(request.node, target)
    proc = target.process
    return DaemonInfo(
        target.address,
        target.pid,
        target.mode,
        target.label,
        proc.log_path if proc else None,
        proc.config_path if proc else None,
    )


@pytest.fixture
def cuzk_client(cuzk_daemon: DaemonInfo) -> Generator[ProvingClient, None, None]:
    """A gRPC client connected to the daemon under test."""
    with ProvingClient(cuzk_daemon.address) as client:
        yield client


@pytest.fixture
def cuzk_ready(cuzk_session: CuzkSession, cuzk_daemon: DaemonInfo, request: pytest.FixtureRequest) -> Target:
    """The daemon after the readiness chain: SRS loaded and warmed up.

    For the kinds of the test's ``@pytest.mark.cuzk_kinds(...)``, else every selected kind.
    """
    marker = request.node.get_closest_marker("cuzk_kinds")
    kinds = [KINDS[k].name for k in marker.args] if marker else None
    return cuzk_session.ready(cuzk_daemon.label, kinds=kinds)


def _verifier(session: CuzkSession, kind: ProofKindInfo) -> Callable[[Any, bytes], bool] | None:
    """Full pairing verification, available for reference-engine proofs."""
    if session.resolve_mode().mode != "ref" or session.param_cache is None:
        return None
    from .refengine.verify import verify_proof

    cache = session.param_cache
    preset = session.settings.preset
    return lambda req, proof: verify_proof(cache, kind, req, proof, preset=preset)


@pytest.fixture
def cuzk_target(cuzk_session: CuzkSession, request: pytest.FixtureRequest) -> Target:
    """The ready daemon for this test's case (restarted for its batch size when spawned)."""
    case: Case = request.node.callspec.params.get("cuzk_case") or request.node.callspec.params["cuzk_kind"]
    _mark_log(request.node, cuzk_session.target(case.label))
    _bring_up(cuzk_session, case.label, case.batch_size)
    found = cuzk_session.data(case.kind.name)
    if isinstance(found, DataUnavailable):
        pytest.skip(str(found))
    target = _bring_up(cuzk_session, case.label, case.batch_size, [case.kind.name])
    _mark_log(request.node, target)
    return target


@pytest.fixture
def cuzk_run(
    cuzk_session: CuzkSession, cuzk_target: Target, request: pytest.FixtureRequest
) -> Callable[[Case], CaseResult]:
    """Run a suite case against its daemon: proofs in waves, memory sampled, gates applied."""
    from .memory import DaemonSampler

    benchmark = (
        request.getfixturevalue("benchmark") if request.config.pluginmanager.hasplugin("benchmark") else None
    )
    s = cuzk_session.settings

    def run(case: Case) -> CaseResult:
        target = cuzk_target
        with ProvingClient(target.address) as client:
            sampler = DaemonSampler(target.pid, s.sample_interval) if target.pid else None
            runner = Runner(
                client=client,
                make_request=lambda: cuzk_session.request(case.kind),
                proof_timeout_s=s.proof_timeout,
                alive=target.alive,
                gone=target.gone,
                death_message=lambda: target.death_message(sampler.rss_peak_so_far() if sampler else None),
                verify=_verifier(cuzk_session, case.kind),
                mark=sampler.mark if sampler else None,
            )
            if sampler:
                sampler.start()
            try:
                result = run_case(case, runner, s.proofs, benchmark)
            except (DaemonExited, DaemonUnavailable) as exc:
                if target.mode == "attach":
                    target.crashed = str(exc)
                raise
            finally:
                memory = sampler.stop() if sampler else None
        result.memory = memory
        request.node.stash[_RESULT] = result
        if cuzk_session.recorder is not None:
            cuzk_session.recorder.record(cuzk_session, target, case, result, request.node.nodeid)
        if any(p.timed_out for p in result.proofs):
            cuzk_session.out_of_service(target, f"a {case.kind.name} proof timed out in {request.node.name}")
        if benchmark is not None:
            benchmark.extra_info.update(result.extra_info())
        if s.plots and memory is not None:
            from .plots import plot_memory

            s.plots.mkdir(parents=True, exist_ok=True)
            plot_memory(memory, s.plots / f"{request.node.name}.png", request.node.nodeid)
        baseline = baseline_mapping(s, getattr(request.config, "_benchmarksession", None))
        fullname = getattr(benchmark, "fullname", request.node.nodeid)
        failures, unchecked = check_gates(result, s, baseline.get(fullname))
        for note in unchecked:
            request.node.warn(CuzkWarning(note))
        if failures:
            pytest.fail(f"{request.node.name}: " + "; ".join(failures), pytrace=False)
        return result

    return run
