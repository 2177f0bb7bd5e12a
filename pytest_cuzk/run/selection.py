"""Which collected tests a run keeps, and which proof kinds they select.

The load scenarios of the packaged suite take minutes, so they run only when asked; the kinds
the kept cases and ``cuzk_kinds`` markers name are the ones that get preload and warm-up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_cuzk.run.cases import item_case
from pytest_cuzk.wire.kinds import UnknownKind, by_name

__all__ = ["marker_problems", "selected_kinds", "unasked_scenarios"]

SCENARIO_TESTS = ("test_server", "test_priority", "test_sweep")  # the suite's load scenarios
_SCENARIO_WORDS = ("server", "priority", "sweep", "under")  # what only their ids contain, not the cases'
_SCENARIO_FILE = Path(__file__).parents[1] / "suite" / "test_scenarios.py"


def marker_problems(items: list[pytest.Item]) -> list[str]:
    """One line per ``cuzk_kinds`` marker argument that names no kind."""
    return [
        f"{item.nodeid}: @pytest.mark.cuzk_kinds: {why}"
        for item in items
        for mark in item.iter_markers("cuzk_kinds")
        for name in mark.args
        if (why := _kind_problem(str(name)))
    ]


def unasked_scenarios(config: pytest.Config, asked: bool, items: list[pytest.Item]) -> list[pytest.Item]:
    """The packaged suite's load scenarios, unless ``asked`` (--cuzk-scenarios), -k or a node id say so."""
    keyword = str(config.option.keyword or "")
    args = [str(a) for a in config.args]
    named = any(word in keyword for word in _SCENARIO_WORDS) or any(
        f"::{name}" in a for a in args for name in SCENARIO_TESTS
    )
    if asked or named or any(a.endswith(_SCENARIO_FILE.name) for a in args):
        return []
    return [
        item
        for item in items
        if getattr(item, "originalname", None) in SCENARIO_TESTS and item.path == _SCENARIO_FILE
    ]


def selected_kinds(items: list[pytest.Item]) -> set[str]:
    """The kinds the kept cases prove and the ``cuzk_kinds`` markers name (bad names stop the run earlier)."""
    cases = [c for c in (item_case(i) for i in items) if c is not None]
    kinds = {k.name for c in cases for k in c.kinds}
    marked = (str(k) for i in items for m in i.iter_markers("cuzk_kinds") for k in m.args)
    return kinds | {by_name(k).name for k in marked if _kind_problem(k) is None}


def _kind_problem(name: str) -> str | None:
    try:
        by_name(name)
    except UnknownKind as exc:
        return str(exc)
    return None
