"""The reference pages' generated parts, built from the code at every ``mkdocs build``.

A page asks for a part with a line ``<!-- reference: NAME -->``; ``on_page_markdown`` puts the
part in its place. The parts come from the one table or parser each fact lives in (the option
table, the hook specifications, the commands' argparse parsers, the results database's tables),
so the site cannot drift from the code. ``tests/test_docs.py`` renders them in process.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa

from pytest_cuzk import hookspec
from pytest_cuzk.config.options import OPTIONS, Option
from pytest_cuzk.fleet.cli import build_parser as perf_parser
from pytest_cuzk.refengine.cli import _parser as ref_parser
from pytest_cuzk.results.database import SCHEMA_VERSION, build_metadata

__all__ = ["PARTS", "expand", "on_page_markdown"]

MARKER = re.compile(r"^<!-- reference: ([a-z-]+) -->$", re.MULTILINE)
HELP_WIDTH = 100  # columns of the commands' help, whatever the terminal that builds the site


def _cell(text: str) -> str:
    """Text fit for one cell of a Markdown table."""
    return text.replace("|", "\\|").replace("\n", " ")


def _default(opt: Option) -> str:
    if opt.default in (None, ()):
        return ""
    if opt.kind == "bool":
        return "on" if opt.default else "off"
    if isinstance(opt.default, float) and opt.default.is_integer():
        return f"`{int(opt.default)}`"
    return f"`{opt.default}`"


def options() -> str:
    """One row per option: the flag, its ini key and environment variable, its default and help."""
    rows = ["| option | ini key, environment variable | default | meaning |", "|---|---|---|---|"]
    for opt in OPTIONS:
        flag = f"`{opt.flag}`" + (" (repeatable)" if opt.kind == "list" else "")
        if opt.old_name:
            flag += f"; former name `--cuzk-{opt.old_name}`, still read with a warning"
        names = f"`{opt.ini}`, `{opt.env}`"
        rows.append(f"| {flag} | {names} | {_default(opt)} | {_cell(opt.help)} |")
    return "\n".join(rows)


def _docstring(func: Callable[..., Any]) -> str:
    """A docstring as Markdown: its ``::`` literal blocks become fenced Python."""
    out: list[str] = []
    lines = inspect.cleandoc(func.__doc__ or "").splitlines()
    code: list[str] | None = None
    for line in [*lines, ""]:
        if code is not None:
            if line.startswith("    ") or not line.strip():
                code.append(line)
                continue
            out += ["```python", textwrap.dedent("\n".join(code)).strip("\n"), "```", ""]
            code = None
        if line.rstrip().endswith("::"):
            out += [line.rstrip()[:-1], ""]
            code = []
        else:
            out.append(line)
    if code:
        out += ["```python", textwrap.dedent("\n".join(code)).strip("\n"), "```"]
    return "\n".join(out).strip()


def hooks() -> str:
    """Each of the plugin's hooks: its signature, how its answers combine, and its docstring."""
    parts = []
    for name, func in vars(hookspec).items():  # in the order they are declared
        spec = getattr(func, "pytest_spec", None)
        if not inspect.isfunction(func) or spec is None:
            continue
        combine = (
            "The first answer that is not None wins" if spec["firstresult"] else "Every implementation runs"
        )
        signature = str(inspect.signature(func)).replace("'", "")  # the annotations are strings
        parts += [
            f"## `{name}`",
            "",
            f"```python\ndef {name}{signature}: ...\n```",
            "",
            f"*{combine}.*",
            "",
            _docstring(func),
            "",
        ]
    return "\n".join(parts).strip()


def _commands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser, then each of its subcommands' parsers in the order they were declared."""
    yield parser
    for action in parser._actions:  # argparse has no public way to walk its subcommands
        if isinstance(action, argparse._SubParsersAction):
            yield from dict.fromkeys(action.choices.values())


def _command(parser: argparse.ArgumentParser) -> str:
    parts = []
    for sub in _commands(parser):
        sub.formatter_class = functools.partial(argparse.HelpFormatter, width=HELP_WIDTH)
        parts += [f"## `{sub.prog}`", "", f"```text\n{sub.format_help().rstrip()}\n```", ""]
    return "\n".join(parts).strip()


def cuzk_ref() -> str:
    """``cuzk-ref`` and ``cuzk-ref gen-data``, as their ``--help`` prints them."""
    return _command(ref_parser())


def cuzk_perf() -> str:
    """``cuzk-perf`` and each of its subcommands, as their ``--help`` prints them."""
    return _command(perf_parser())


def _column(column: sa.Column[Any]) -> str:
    keys = []
    if column.primary_key:
        keys.append("primary key")
    keys += [f"references `{fk.target_fullname}`" for fk in column.foreign_keys]
    if column.index:
        keys.append("indexed")
    since = column.info.get("since", 1)
    return (
        f"| `{column.name}` | `{column.type}` | {'no' if column.nullable else 'yes'} | "
        f"{', '.join(keys)} | {since if since > 1 else ''} |"
    )


def schema() -> str:
    """Every table and column of the results database at the current schema version."""
    parts = [f"Schema version {SCHEMA_VERSION}.", ""]
    for table in build_metadata().sorted_tables:
        parts += [
            f"### `{table.name}`",
            "",
            "| column | type | required | key | since version |",
            "|---|---|---|---|---|",
            *(_column(c) for c in table.columns),
            "",
        ]
    return "\n".join(parts).strip()


PARTS: dict[str, Callable[[], str]] = {
    "options": options,
    "hooks": hooks,
    "cuzk-ref": cuzk_ref,
    "cuzk-perf": cuzk_perf,
    "schema": schema,
}


def expand(markdown: str) -> str:
    """The page with each ``<!-- reference: NAME -->`` line replaced by that generated part."""

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in PARTS:
            raise ValueError(f"unknown reference part {name!r} (known: {', '.join(PARTS)})")
        return PARTS[name]()

    return MARKER.sub(part, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs hook: expand the page's generated parts."""
    return expand(markdown)
