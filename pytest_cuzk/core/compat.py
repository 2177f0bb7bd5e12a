"""Every contact with pytest-benchmark's, pytest-timeout's and pytest's own internals, in one place.

Neither plugin publishes an API for what the gates need (the compared run, the storage,
whether this run will be saved, stopping a save, the timeout's message), nor pytest one for
its ``-k`` matcher, so the plugin reads their attributes here and nowhere else;
``tests/core/test_compat.py`` holds a contract test for each, which fails when an upgrade moves what is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "BENCHMARK_PLUGIN",
    "SavedRun",
    "benchmark_whole",
    "compare_asked",
    "compared_runs",
    "keep_from_storage",
    "keyword_names",
    "keyword_selects",
    "machine_info_differs",
    "saved_runs",
    "saving_as",
    "stopped_by_pytest_timeout",
    "storage_name",
]

BENCHMARK_PLUGIN = "benchmark"  # pytest-benchmark's entry-point name, as ``-p no:benchmark`` spells it
_TIMEOUT_TAIL = "from pytest-timeout."  # the end of pytest-timeout's failure message (signal method)


@dataclass(frozen=True)
class SavedRun:
    """One saved pytest-benchmark run: where it lies, and its JSON."""

    path: str
    data: dict[str, Any]

    def benchmarks(self) -> dict[str, dict[str, Any]]:
        """Its benchmarks by fullname (a pytest node id)."""
        return {b["fullname"]: b for b in self.data.get("benchmarks", []) if "fullname" in b}


def keyword_names(item: pytest.Item) -> set[str]:
    """The names pytest's ``-k`` matches ``item`` by: its and its parents' names, markers, extra keywords."""
    from _pytest.mark import KeywordMatcher

    return set(KeywordMatcher.from_item(item)._names)


def keyword_selects(expression: str, names: set[str]) -> bool:
    """Whether the ``-k`` ``expression`` selects an item of these names, as pytest's own ``-k`` decides."""
    from _pytest.mark import KeywordMatcher
    from _pytest.mark.expression import Expression

    return Expression.compile(expression).evaluate(KeywordMatcher(frozenset(names)))


def _session(config: pytest.Config) -> Any | None:
    return getattr(config, "_benchmarksession", None)


def _option(config: pytest.Config, name: str) -> Any:
    try:
        return config.getoption(name)
    except ValueError:  # pytest-benchmark not loaded (-p no:benchmark)
        return None


def compare_asked(config: pytest.Config) -> str | bool | None:
    """``--benchmark-compare``: ``True`` for the latest saved run, a name, or ``None`` when not given."""
    value = _option(config, "benchmark_compare")
    return value if value else None


def saving_as(config: pytest.Config) -> str | None:
    """The name this run is saved under (``--benchmark-save`` or ``--benchmark-autosave``), if it is."""
    return _option(config, "benchmark_save") or (_option(config, "benchmark_autosave") or None)


def storage_name(config: pytest.Config) -> str:
    """Where pytest-benchmark keeps its saved runs, as it prints it."""
    bs = _session(config)
    return str(bs.storage) if bs is not None else str(_option(config, "benchmark_storage"))


def machine_info_differs(
    benchmarksession: Any, error: ValueError, now: dict[str, Any], saved: dict[str, Any]
) -> None:
    """pytest-benchmark's "machine_info is different" warning, where its own raises ``error``.

    It names its storage relative to the working directory, so a storage elsewhere
    (``--benchmark-storage=/abs/path``) turns the warning into a ValueError and pytest into an
    INTERNALERROR, whenever two builds are compared. Any other ValueError is not ours to hide.
    """
    storage = Path(str(getattr(benchmarksession, "storage", "")))
    if storage.is_relative_to(Path.cwd()):
        raise error
    keys = sorted({*now, *saved})
    differ = [k for k in keys if now.get(k) != saved.get(k)]
    for key in ("cuzk",):  # name the plugin's own entries one level down
        if key in differ and isinstance(now.get(key), dict) and isinstance(saved.get(key), dict):
            inner = sorted({*now[key], *saved[key]})
            differ.remove(key)
            differ += [f"{key}.{k}" for k in inner if now[key].get(k) != saved[key].get(k)]
    differs = ", ".join(differ)
    benchmarksession.logger.warning(
        f"Benchmark machine_info is different ({differs}) from the saved run's (location: {storage})."
    )


def compared_runs(config: pytest.Config) -> list[SavedRun]:
    """The runs ``--benchmark-compare`` loaded, oldest first (pytest-benchmark loads them at configure)."""
    bs = _session(config)
    mapping = getattr(bs, "compared_mapping", None) or {}
    wanted = {str(path) for path in mapping}
    return [run for run in saved_runs(config) if run.path in wanted]


def saved_runs(config: pytest.Config) -> list[SavedRun]:
    """Every run in pytest-benchmark's storage, oldest first (by its ``NNNN_`` number)."""
    storage = getattr(_session(config), "storage", None)
    return [SavedRun(str(path), data) for path, data in storage.load()] if storage is not None else []


def keep_from_storage(config: pytest.Config) -> str | None:
    """Stop pytest-benchmark saving this run (its ``--benchmark-json`` is still written); the name it had."""
    bs = _session(config)
    name = saving_as(config)
    if bs is not None and name:
        bs.save = None
        bs.autosave = None
    return name


def benchmark_whole(benchmark: Any) -> None:
    """Undo ``pedantic``'s failed mark after its setup raised to end the rounds: each round ran whole."""
    benchmark.has_error = False


def stopped_by_pytest_timeout(error: BaseException) -> bool:
    """Whether pytest-timeout failed the test (its signal method): its message is the only sign."""
    return isinstance(error, pytest.fail.Exception) and str(error).endswith(_TIMEOUT_TAIL)
