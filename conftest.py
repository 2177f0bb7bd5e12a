"""Repository-level pytest configuration: opt-in figures (pytester comes from addopts in pyproject).

The benchmarks under ``tests/benchmarks`` measure and print figures (and check the targets
they state); they take minutes, so ``pytest tests`` leaves them out unless ``--figures`` is given.
The packaged suite (``pytest_cuzk/suite``, what ``pytest`` runs from the repository root) is run by
``tests/test_suite_runs.py`` against both behaviours of cuzk-ref, so ``pytest tests`` does not
also run it against whatever ``--cuzk-daemon=auto`` finds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parent / "tests" / "benchmarks"
SUITE = Path(__file__).parent / "pytest_cuzk" / "suite"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--figures",
        action="store_true",
        help="Also run the benchmarks in tests/benchmarks: they print figures and check their stated targets",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Without --figures the benchmarks folder is not even collected: a GPU benchmark would skip at import."""
    if collection_path == BENCHMARKS and not config.getoption("--figures"):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    own_tests = [item for item in items if SUITE not in item.path.parents]
    # Only when the plugin's own tests run: `pytest pytest_cuzk/suite` (or `pytest`) runs the suite itself.
    left_out = [item for item in items if SUITE in item.path.parents] if own_tests else []
    if not config.getoption("--figures"):  # a benchmark file named on the command line
        left_out += [item for item in items if BENCHMARKS in item.path.parents]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("--figures"):
        return None
    return "benchmarks in tests/benchmarks are left out: pass --figures to run them"
