"""Shared fixtures of the plugin's own tests."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest
from support import QUICK_PLAN, not_an_xdist_worker

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
# Folders whose tests carry a mark by where they live: ``-m "not e2e and not packaging"`` is the quick loop.
FOLDER_MARKS = {"e2e": "e2e", "packaging": "packaging", "gpu": "gpu"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.relative_to(HERE).parts[0] if HERE in item.path.parents else ""
        if folder in FOLDER_MARKS:
            item.add_marker(FOLDER_MARKS[folder])


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
