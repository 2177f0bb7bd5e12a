"""Repository-level pytest configuration: pytester for the plugin's own tests, and opt-in figures.

The benchmarks under ``tests/benchmarks`` measure and print figures (and check the targets
they state); they take minutes, so ``pytest tests`` leaves them out unless ``--figures`` is given.
In ``pytest tests`` the suite only has to run, so its cases prove twice each; ``pytest`` (the
suite alone) measures with the plugin's own defaults.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

BENCHMARKS = Path(__file__).parent / "tests" / "benchmarks"
SUITE = Path(__file__).parent / "tests" / "suite"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before the plugin reads its options: two proofs a suite case when the plugin's own tests run too."""
    paths = [Path(str(arg).split("::")[0]).resolve() for arg in config.args]
    if any(path in SUITE.parents for path in paths):  # e.g. pytest tests, not pytest tests/suite
        for dest in ("cuzk_proofs", "cuzk_max_proofs"):
            if getattr(config.option, dest, None) is None:
                setattr(config.option, dest, "2")


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
