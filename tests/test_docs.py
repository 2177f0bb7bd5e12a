"""The docs site: its reference holds every option, hook and command; its nav leads to each task.

The reference parts are rendered in process from the pages, as ``mkdocs build`` renders them,
so a page that loses its marker fails here as surely as a generator that drops a name.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from pytest_cuzk import hookspec
from pytest_cuzk.config.options import OPTIONS
from pytest_cuzk.fleet.cli import build_parser as perf_parser
from pytest_cuzk.refengine.cli import _parser as ref_parser
from pytest_cuzk.results.database import build_metadata

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# Each task a newcomer comes for, and the page under "How-to" that answers it.
NEWCOMER_TASKS = {
    "gate a pull request's build": "how-to/gate-a-pull-request.md",
    "attach to a remote daemon": "how-to/attach.md",
    "rss and vram peaks": "how-to/memory-peaks.md",
    "one kind at one batch size": "how-to/one-kind.md",
    "write your own tests": "how-to/own-tests.md",
    "rank rented offers": "how-to/rank-offers.md",
}


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    """The mkdocs hook that generates the reference, loaded as mkdocs loads it: by its path."""
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page(reference: ModuleType, name: str) -> str:
    return str(reference.expand((DOCS / "reference" / name).read_text()))


def test_every_option_is_in_the_options_page(reference: ModuleType) -> None:
    page = _page(reference, "options.md")
    for opt in OPTIONS:
        for name in (opt.flag, opt.ini, opt.env):
            assert f"`{name}`" in page, name
        if opt.old_name:
            assert f"`--cuzk-{opt.old_name}`" in page


def test_every_hook_is_in_the_hooks_page(reference: ModuleType) -> None:
    page = _page(reference, "hooks.md")
    hooks = [n for n, f in inspect.getmembers(hookspec, inspect.isfunction) if n.startswith("pytest_cuzk_")]
    assert len(hooks) >= 5
    for name in hooks:
        assert f"## `{name}`" in page, name


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    out = {parser.prog: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out |= {sub.prog: sub for sub in action.choices.values()}
    return out


@pytest.mark.parametrize(
    ("page_name", "parser", "least"), [("cuzk-ref.md", ref_parser, 2), ("cuzk-perf.md", perf_parser, 10)]
)
def test_every_command_and_its_options_are_in_its_page(
    reference: ModuleType, page_name: str, parser: Any, least: int
) -> None:
    page = _page(reference, page_name)
    commands = _subcommands(parser())
    assert len(commands) >= least
    for prog, sub in commands.items():
        assert f"## `{prog}`" in page, prog
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in page, (prog, flag)


def test_every_table_and_column_is_in_the_schema_page(reference: ModuleType) -> None:
    page = _page(reference, "results-database.md")
    for table in build_metadata().sorted_tables:
        assert f"### `{table.name}`" in page
        for column in table.columns:
            assert f"| `{column.name}` |" in page, f"{table.name}.{column.name}"


def test_an_unknown_reference_part_names_the_known_ones(reference: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"unknown reference part 'option'.*options, hooks"):
        reference.expand("<!-- reference: option -->")


def _nav_pages(nav: list[Any]) -> dict[str, str]:
    """Every page of a nav section, by its title."""
    pages: dict[str, str] = {}
    for entry in nav:
        for title, target in entry.items():
            if isinstance(target, list):
                pages |= _nav_pages(target)
            else:
                pages[title] = target
    return pages


def test_the_navigation_leads_to_each_newcomer_task() -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    sections = {title: target for entry in nav for title, target in entry.items()}
    how_to = _nav_pages(sections["How-to"])
    for task, page in NEWCOMER_TASKS.items():
        titles = [title for title, target in how_to.items() if target == page]
        assert titles, f"the How-to section has no entry for {page} ({task})"
        assert task in titles[0].lower(), (task, titles[0])
        assert (DOCS / page).is_file(), page
