"""Repository-level pytest configuration: opt-in figures (pytester comes from addopts in pyproject).

The benchmarks under ``tests/benchmarks`` measure and print figures (and check the targets
they state); they take minutes, so ``pytest tests`` leaves them out unless ``--figures`` is given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parent / "tests" / "benchmarks"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--figures",
        action="store_true",
        help="Also run the benchmarks in tests/benchmarks: they print figures and check their stated targets",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--figures"):
        return
    benchmarks = [item for item in items if BENCHMARKS in item.path.parents]
    if benchmarks:
        config.hook.pytest_deselected(items=benchmarks)
        items[:] = [item for item in items if item not in benchmarks]


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("--figures"):
        return None
    return "benchmarks in tests/benchmarks are left out: pass --figures to run them"
