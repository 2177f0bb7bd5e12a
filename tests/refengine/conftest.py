"""Fixtures for the reference engine's tests: data, a shared param cache, in-process and spawned daemons.

Trusted setup is the expensive part of a cold engine, so the param cache is session-scoped:
each circuit's ``.params``/``.vk`` are written once, on first need, and reused by every
engine the session starts. Test data comes from ``gendata`` once per session too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from engine_support import Daemon, RefData, Running, connect

from pytest_cuzk.refengine.config import RefConfig
from pytest_cuzk.refengine.engine import Engine
from pytest_cuzk.refengine.server import serve

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


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
    for daemon in left:
        daemon.proc.kill()
        daemon.proc.wait()
    assert not left, f"{len(left)} cuzk-ref process(es) still running at teardown"
