"""Shared fixtures of the plugin's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data dir (reference params, PCE files, generated data) for every inner pytest run.

    Trusted setup then runs once per test session rather than once per inner run.
    """
    return tmp_path_factory.mktemp("cuzk-cache")


@pytest.fixture
def inner(pytester: pytest.Pytester, shared_cache: Path, monkeypatch: pytest.MonkeyPatch):
    """Run pytest in a subprocess against the reference engine with the shared cache.

    ``inner(files, *args)`` writes the test files (name -> source) and returns the
    RunResult.
    """
    # An inner run is not an xdist worker, even when this test runs in one.
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)

    def run(files: dict[str, str], *args: str, timeout: float = 300):
        pytester.makepyfile(**files)
        return pytester.runpytest_subprocess(
            ".",  # these files, not the packaged suite a bare --cuzk-daemon runs
            "--cuzk-daemon=ref",
            f"--cuzk-data-dir={shared_cache}",
            "-p",
            "no:cacheprovider",
            *args,
            timeout=timeout,
        )

    return run
