"""``cuzk-perf report``: the results database as one self-contained HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_cuzk.fleet.errors import PerfError
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.vocab.files import atomic_write

__all__ = ["cmd_report"]


def cmd_report(db: ResultsDB, args: argparse.Namespace) -> int:
    """One HTML page: hosts ranked per kind, their history across builds, the latest comparisons."""
    from pytest_cuzk.fleet.dbpage import db_page
    from pytest_cuzk.html.render import render

    path = Path(args.html)
    if path.is_dir():
        raise PerfError(f"--html {path} is a directory: give a file, e.g. {path / 'results.html'}")
    page = render("db.html.j2", **db_page(db, args.kind, args.fail))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, page)
    except OSError as exc:
        raise PerfError(f"cannot write --html {path}: {exc.strerror}") from None
    print(f"wrote {path}")
    return 0
