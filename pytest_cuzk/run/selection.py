"""Which collected tests a run keeps, and which proof kinds they select.

The load scenarios of the packaged suite take minutes, so they run only when asked; the kinds
the kept cases and ``cuzk_kinds`` markers name are the ones that get preload and warm-up. A run
that names a daemon but collects no cuzk test, or whose ``-k`` leaves none, is told why.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_cuzk.config.options import CASE_FIXTURES, uses_cuzk
from pytest_cuzk.core import transport
from pytest_cuzk.core.compat import keyword_names, keyword_selects
from pytest_cuzk.run.cases import item_case
from pytest_cuzk.vocab.kinds import KINDS, ProofKindInfo, UnknownKind, by_name
from pytest_cuzk.vocab.units import plural

if TYPE_CHECKING:
    from pytest_cuzk.config.settings import Settings

__all__ = ["CollectionCheck", "marker_problems", "nothing_measured", "selected_kinds", "unasked_scenarios"]

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
        self.had_cases = False  # and a suite case: then a selection without one is a usage error

    @pytest.hookimpl(tryfirst=True)  # before -k and --deselect take items away
    def pytest_collection_modifyitems(self, session: pytest.Session, items: list[pytest.Item]) -> None:
        self.had_cuzk = any(uses_cuzk(item) for item in items)
        self.had_cases = any(_measures(item) for item in items)
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
        if not self.had_cuzk or self.had_cases or not keyword or any(uses_cuzk(item) for item in items):
            return []  # with cases collected, ``nothing_measured`` said it
        return [
            f"cuzk: -k {keyword!r} selects no cuzk test: a case's id names its kind ({', '.join(KINDS)}), "
            "batch size and concurrency, e.g. -k porep or -k 'winning and batch1'"
        ]


_MEASURED = tuple(name for name in CASE_FIXTURES if name != "cuzk_kind")  # the per-kind checks time nothing
_LISTED = 6  # cases named in full in the error; the rest counted


def _measures(item: pytest.Item) -> bool:
    """Whether a test is a suite case that measures (a proving case or a load scenario)."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(name in callspec.params for name in _MEASURED)


def nothing_measured(
    config: pytest.Config, settings: Settings, kept: list[pytest.Item], deselected: list[pytest.Item]
) -> str | None:
    """Why a selection that keeps no suite case to measure is a usage error; None when it keeps one.

    Such a run passes on what it kept (the per-kind daemon checks, tests of other plugins) and
    measured nothing: a CI gate set up this way is green forever. Only a selection of collected
    cases counts; tests named by node id on the command line are taken as asked for.
    """
    cases = [item for item in (*kept, *deselected) if _measures(item)]
    if not cases or any(_measures(item) for item in kept) or any("::" in str(a) for a in config.args):
        return None
    keyword, marks = (str(v or "").strip() for v in (config.option.keyword, config.option.markexpr))
    asked = " ".join([f"-k {keyword!r}"] * bool(keyword) + [f"-m {marks!r}"] * bool(marks)) or "--deselect"
    why = _missing_batches(keyword, settings) or (
        f"{asked} deselects every case (a case's id names its kind, {', '.join(KINDS)}, its batch size and "
        "concurrency, e.g. porep-batch1-j1)"
    )
    proving = [item.name for item in cases if getattr(item, "originalname", "") == "test_prove"]
    names = sorted(proving) or [item.name for item in cases]
    would = ", ".join(names[:_LISTED]) + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")
    others = (
        f"; the {plural(len(kept), 'test')} it keeps (daemon checks, tests without a case) measure "
        "nothing, so do not make it a run (to run only them, name them by node id, FILE::TEST)"
        if kept
        else ""
    )
    return f"{asked} leaves no suite case to measure: {why}{others}. Cases that would run: {would}"


def _missing_batches(keyword: str, settings: Settings) -> str:
    """The kinds the selection names at batch sizes they do not have (only PoRep and SnapDeals batch)."""
    batchable = [k.name for k in KINDS.values() if k.batchable]
    asked: dict[ProofKindInfo, list[int]] = {}
    for kind in (k for k in KINDS.values() if not k.batchable):
        for b in (b for b in settings.batch_sizes if b > 1):
            ids = {f"test_prove[{kind.name}-batch{b}-j{j}]" for j in settings.concurrency}
            if not keyword or any(keyword_selects(keyword, {i, "test_prove"}) for i in ids):
                asked.setdefault(kind, []).append(b)
    sizes, only = ",".join(str(b) for b in settings.batch_sizes), " and ".join(batchable)
    return "; ".join(
        f"{kind.name} has no batch {' or '.join(map(str, bs))} (cuzk batches only {only}), "
        f"so --cuzk-batch-sizes={sizes} gives it no case: add 1 to prove it"
        for kind, bs in asked.items()
    )


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
