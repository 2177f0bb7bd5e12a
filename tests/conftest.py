"""Shared fixtures of the plugin's own tests: inner pytest runs, the user's venv, reference engines.

Trusted setup is the expensive part of a cold engine, so the param cache is shared by the whole
test session (xdist workers too): each circuit's ``.params``/``.vk`` are written once, on first
need, and reused by every engine and inner run. Test data comes from ``gendata`` once per session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import venv
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.engine_support import Daemon, RefData, Running, connect
from helpers.support import QUICK_PLAN, not_an_xdist_worker

from pytest_cuzk.refengine.config import RefConfig
from pytest_cuzk.refengine.engine import Engine
from pytest_cuzk.refengine.server import serve

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
# Folders whose tests carry a mark by where they live. The end-to-end and packaging tiers take
# minutes (subprocess pytest runs, real daemons, wheels and venvs): `pytest tests` leaves them out
# unless -m or a path inside them asks; `-m "e2e or packaging"` runs them (.ci/run runs both tiers).
# tests/plugin runs whole pytest sessions (in process, against fake daemons): end to end too.
FOLDER_MARKS = {"e2e": "e2e", "plugin": "e2e", "packaging": "packaging", "gpu": "gpu"}
SYSTEM_TIERS = ("e2e", "packaging")
# Wherever it lives, a test that runs a system end to end is in the e2e tier: the real reference
# engine (trusted setup, synthesis, MSMs: a second or more a proof on 2 cores), a pytest run in a
# subprocess, a real PostgreSQL server or a headless browser. What is left, the loop, is unit tests:
# one process, fake daemons and in-process servers, most tests in milliseconds.
SYSTEM_FIXTURES = ("ref_params", "inner", "browser", "pg_server")
# Folders whose tests take seconds each (real proofs, in-process plugin runs) run first: what is
# left at the end, when the workers even out their queues, are tests of milliseconds.
LONG_FIRST = ("refengine", "plugin")
# An in-process pytest run (pytester) is a user's run made under this run's warning filters, which
# make every warning an error: there the plugin's CuzkWarnings are its report, shown as in a user's
# run. Any other warning, an unclosed pipe or socket of the plugin's, still fails the inner run.
USERS_RUN_WARNINGS = pytest.mark.filterwarnings("default::pytest_cuzk.core.errors.CuzkWarning")
# A warning in the plugin's own tests is a bug (an unclosed pipe, socket or engine): fail on it. Set
# here, per test, not in pyproject.toml's ini: that also configures the packaged suite run from this
# checkout (the README's main job), where the plugin's CuzkWarnings are its report, not errors.
OUR_TESTS_WARNINGS = pytest.mark.filterwarnings("error")


def _folder(item: pytest.Item) -> str:
    return item.path.relative_to(HERE).parts[0] if HERE in item.path.parents else ""


def _long_first(item: pytest.Item) -> int:
    folder = _folder(item)
    return LONG_FIRST.index(folder) if folder in LONG_FIRST else len(LONG_FIRST)


def _runs_a_system(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    on_postgresql = callspec is not None and callspec.params.get("db_url") == "postgresql"
    return on_postgresql or any(f in getattr(item, "fixturenames", ()) for f in SYSTEM_FIXTURES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_long_first)  # stable: a module's tests stay together, so its fixtures are set up once
    for item in items:
        folder = _folder(item)
        if folder in FOLDER_MARKS:
            item.add_marker(FOLDER_MARKS[folder])
        if _runs_a_system(item) and not item.get_closest_marker("e2e"):
            item.add_marker("e2e")
        if HERE in item.path.parents:
            item.add_marker(OUR_TESTS_WARNINGS, append=False)  # first: a test's own filters override it
        if "pytester" in item.fixturenames:
            item.add_marker(USERS_RUN_WARNINGS)
    if config.option.markexpr:
        return  # the run chose its tiers
    # A path narrower than the whole suite (a folder, a file, a test) asks for all of its tests.
    named = [n for n in (Path(str(a).split("::")[0]).resolve() for a in config.args) if n != HERE]

    def system(item: pytest.Item) -> bool:
        asked = any(item.path == n or n in item.path.parents for n in named)
        return not asked and any(item.get_closest_marker(t) for t in SYSTEM_TIERS)

    left_out = [system(item) for item in items]
    if any(left_out):
        config.hook.pytest_deselected(items=[item for item, out in zip(items, left_out, strict=True) if out])
        items[:] = [item for item, out in zip(items, left_out, strict=True) if not out]


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n 2`` shares these tests out by work stealing (another ``--dist`` is the run's own choice).

    With xdist's default (``load``) a worker busy with slow tests gets no more until its queue is
    short, and one chunk of proving tests handed out too early kept one worker busy for tens of
    seconds after the other had run out. Work stealing splits the tests in two and lets a worker
    that runs out take half of the other's queue.
    """
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Said on the controller too (under xdist it does not collect): which tiers this run leaves out."""
    if config.option.markexpr:
        return None
    return "end-to-end and packaging tests run only when asked: pytest tests -n 2 -m 'e2e or packaging'"


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data dir (reference params, PCE files, generated data) for every test of the session.

    Under xdist the workers share it too (the engine and the data store lock what they write),
    so trusted setup runs once per circuit for the whole test run. Tests of a fresh cache make
    their own.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' basetemps share this folder
    cache = root / "cuzk-cache"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.fixture(scope="session")
def ref_params(shared_cache: Path) -> Path:
    """The reference engine's param cache of the default preset: where inner runs keep it too."""
    params = shared_cache / "ref-params-default"
    params.mkdir(exist_ok=True)
    return params


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short private directory for unix sockets (paths are limited to 107 bytes), removed after."""
    path = Path(tempfile.mkdtemp(prefix="cuzkref-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def inner(pytester: pytest.Pytester, shared_cache: Path, monkeypatch: pytest.MonkeyPatch):
    """Run pytest in a subprocess against the reference engine with the shared cache.

    ``inner(files, *args)`` writes the test files (name -> source) and returns the
    RunResult.
    """
    not_an_xdist_worker(monkeypatch)

    def run(files: dict[str, str], *args: str, timeout: float = 300):
        pytester.makepyfile(**files)
        return pytester.runpytest_subprocess(
            ".",  # these files, not the packaged suite a bare --cuzk-daemon runs
            "--cuzk-daemon=ref",
            f"--cuzk-data-dir={shared_cache}",
            "-p",
            "no:cacheprovider",
            *QUICK_PLAN,
            *args,
            timeout=timeout,
        )

    return run


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, built once per session."""
    wheels = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = wheels.glob("pytest_cuzk-*.whl")
    return wheel


@pytest.fixture(scope="session")
def user_venv(tmp_path_factory: pytest.TempPathFactory, built_wheel: Path) -> Path:
    """A venv with the wheel of this checkout installed, not editable: what ``pip install`` gives a user."""
    root = tmp_path_factory.mktemp("as-a-user")
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "-q", str(built_wheel)], check=True, capture_output=True, timeout=600
    )
    return python


# --- the reference engine's own tests (and the GPU tests and benchmarks) ----------------------------
@pytest.fixture(scope="session")
def ref_data(tmp_path_factory: pytest.TempPathFactory) -> RefData:
    """Reference test data for all four kinds, generated once per session."""
    from pytest_cuzk.refengine.gendata import generate

    root = tmp_path_factory.mktemp("ref-data")
    generate(root, preset="default", seed=0)
    return RefData(root, tomllib.loads((root / "manifest.toml").read_text()))


@pytest.fixture
def start_engine(ref_params: Path) -> Iterator[Callable[..., Running]]:
    """Start in-process engines (TCP on 127.0.0.1 by default); all are stopped at teardown."""
    started: list[Running] = []

    def start(listen: str = "127.0.0.1:0", **settings: Any) -> Running:
        config = replace(RefConfig(), listen=listen, param_cache=ref_params, **settings)
        engine = Engine.from_config(config)
        engine.start()
        server, address = serve(engine, listen)
        channel, stub = connect(address)
        running = Running(engine, server, address, channel, stub)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture
def spawn() -> Iterator[Callable[..., Daemon]]:
    """Start ``cuzk-ref`` subprocesses; teardown checks that none is left running."""
    daemons: list[Daemon] = []

    def run(*args: str, env: dict[str, str] | None = None) -> Daemon:
        cmd = [sys.executable, "-m", "pytest_cuzk.refengine.cli", *args]
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        daemon = Daemon(proc)
        daemons.append(daemon)
        return daemon

    yield run
    left = [d for d in daemons if d.proc.poll() is None]
    for daemon in daemons:
        daemon.close()
    assert not left, f"{len(left)} cuzk-ref process(es) still running at teardown"
