"""Which collected tests a run keeps, and which proof kinds they select.

The load scenarios of the packaged suite take minutes, so they run only when asked; the kinds
the kept cases and ``cuzk_kinds`` markers name are the ones that get preload and warm-up. A run
that names a daemon but collects no cuzk test, or whose ``-k`` leaves none, is told why.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_cuzk.config.options import uses_cuzk
from pytest_cuzk.core import transport
from pytest_cuzk.core.compat import keyword_names, keyword_selects
from pytest_cuzk.run.cases import item_case
from pytest_cuzk.wire.kinds import KINDS, UnknownKind, by_name
from pytest_cuzk.wire.units import plural

__all__ = ["CollectionCheck", "marker_problems", "selected_kinds", "unasked_scenarios"]

SCENARIO_TESTS = ("test_server", "test_priority", "test_sweep")  # the suite's load scenarios
# what only the scenarios' names contain, not the cases'
_SCENARIO_WORDS = re.compile("server|priority|sweep|under|scenarios", re.IGNORECASE)
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
    """The packaged suite's load scenarios, unless ``asked`` (--cuzk-scenarios), -k or a node id name them."""
    args = [str(a) for a in config.args]
    if asked or any(a.endswith(_SCENARIO_FILE.name) for a in args):
        return []
    keyword = str(config.option.keyword or "").strip()
    return [
        item
        for item in items
        if getattr(item, "originalname", None) in SCENARIO_TESTS
        and item.path == _SCENARIO_FILE
        and not any(f"::{getattr(item, 'originalname', '')}" in a for a in args)
        and not (keyword and _named_by(keyword, item))
    ]


def _named_by(keyword: str, item: pytest.Item) -> bool:
    """Whether ``-k`` selects the scenario by a word only scenarios have, as pytest's -k matches any item.

    ``-k porep`` selects ``test_priority[winning-under-porep]`` too, by a word every PoRep case
    has: that is no ask. ``-k 'priority and winning'`` selects it only because of ``priority``.
    """
    names = keyword_names(item)
    plain = {_SCENARIO_WORDS.sub("/", name) for name in names}  # the scenario with its own words taken out
    return keyword_selects(keyword, names) and not keyword_selects(keyword, plain)


class CollectionCheck:
    """Registered when ``--cuzk-daemon`` is given: a run with nothing for the daemon says why.

    The ini's ``testpaths`` (or paths on the command line) replace the packaged suite; when they
    hold no cuzk test, a run would pass on unrelated tests, the daemon announced and never used.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.had_cuzk = False  # whether collection, before -k and --deselect, held a cuzk test

    @pytest.hookimpl(tryfirst=True)  # before -k and --deselect take items away
    def pytest_collection_modifyitems(self, session: pytest.Session, items: list[pytest.Item]) -> None:
        self.had_cuzk = any(uses_cuzk(item) for item in items)
        if self.had_cuzk or session.testsfailed:  # a collection error says more than this would
            return
        config = self.config
        if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
            source = f"the ini's testpaths ({' '.join(config.getini('testpaths'))})"
        else:
            source = " ".join(str(a) for a in config.args)
        message = (
            f"--cuzk-daemon={config.option.cuzk_daemon}: none of the {plural(len(items), 'test')} "
            f"collected from {source} uses cuzk, so the daemon would run nothing: run the packaged suite "
            "with --pyargs pytest_cuzk.suite, or from a directory whose ini has no testpaths"
        )
        transport.stop_collection(config, items, message)

    def pytest_report_collectionfinish(self, items: list[pytest.Item]) -> list[str]:
        """A ``-k`` that left no cuzk test hears what the cases' ids are made of."""
        keyword = str(self.config.option.keyword or "").strip()
        if not self.had_cuzk or not keyword or any(uses_cuzk(item) for item in items):
            return []
        return [
            f"cuzk: -k {keyword!r} selects no cuzk test: a case's id names its kind ({', '.join(KINDS)}), "
            "batch size and concurrency, e.g. -k porep or -k 'winning and batch1'"
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
