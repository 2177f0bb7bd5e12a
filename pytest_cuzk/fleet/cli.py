"""cuzk-perf: read the results database to choose hosts, follow builds and gate regressions offline.

Why: specs do not predict proving throughput, so hosts are chosen by what they measured; and
pytest-benchmark can gate timings but not throughput or memory across builds after the fact.

Every subcommand takes ``--db URL`` (default: ``$PYTEST_CUZK_RESULTS_DB``, else the SQLite file in
the user's data dir, see ``pytest_cuzk.results``); all but ``example`` only read it, so a SQLite
file that does not exist is a usage error, not a new empty database. Exit codes: 0 done (also "no data"), 1 a
regression (``compare``) or a newest change worse than ``--fail-worse`` (``changes``), nothing
fits the RAM (``recommend``), ``--gpu`` names no offer's GPU (``offers``) or no run to write
(``changes --csv``), 2 a usage error: each a ``PerfError``, its message printed by ``main``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from pytest_cuzk.fleet.changes import cmd_changes
from pytest_cuzk.fleet.charts import cmd_plot
from pytest_cuzk.fleet.compare import cmd_compare
from pytest_cuzk.fleet.edivisive import MAX_P, MIN_RUNS
from pytest_cuzk.fleet.errors import PerfError
from pytest_cuzk.fleet.example import cmd_example
from pytest_cuzk.fleet.export import cmd_export
from pytest_cuzk.fleet.hosts import cmd_history, cmd_hosts, cmd_recommend
from pytest_cuzk.fleet.offers import DISK, cmd_offers
from pytest_cuzk.fleet.report import cmd_report
from pytest_cuzk.measure.figures import METRICS
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.vocab import units
from pytest_cuzk.vocab.kinds import UnknownKind, by_name

__all__ = ["build_parser", "main", "parse_fail", "parse_figures", "parse_percent"]


def parse_percent(text: str) -> float:
    """Fraction from ``15%`` (or ``15``), for a margin: below 100%.

    A bare number below 1 is refused: ``0.15`` is 0.15%, and was surely meant as 15%.
    """
    try:
        value = units.parse_percent(text, "the option")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value >= 100:
        raise argparse.ArgumentTypeError(f"percentage {text!r} out of range: use 0% to 99%")
    if 0 < value < 1 and not text.strip().endswith("%"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is a percent, {value:g}%: write {value * 100:g}% for that share, "
            f"or {text}% if you mean it"
        )
    return value / 100


def _limits(option: str) -> Callable[[str], dict[str, float]]:
    """Percentages by metric from ``throughput:5%,rss_peak:10%`` (--cuzk-compare-fail's syntax)."""

    def parse(text: str) -> dict[str, float]:
        try:
            return units.parse_thresholds(text, METRICS, option)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


parse_fail = _limits("--fail")


def _size(option: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return units.parse_size(text, option)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _dollars(text: str) -> float:
    try:
        if (value := float(text)) >= 0:
            return value
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"invalid price {text!r}: dollars per hour, e.g. 1.5")


EPILOG = (
    "exit codes: 0 done (also 'no data'), 1 regression / a newest change worse than --fail-worse / "
    "nothing fits the RAM / --gpu names no offer / --csv has no run to write, 2 usage error"
)
MARGIN_HELP = "RAM left free above the measured peaks. Default: 15%%"
OFFERS_HELP = (
    "offers as `vastai search offers --raw` prints them (a JSON list), or a CSV/JSON with the same "
    "columns; - reads standard input"
)
GPU_HELP = "only those whose GPU MODEL names, as vast.ai or NVML spell it: RTX_4090, a40, 'A100 80GB'"
DISK_HELP = (
    f"the disk to price at each offer's storage_cost. Default: {units.format_bytes(DISK)}, cuzk's 32 GiB "
    "parameter files and the PoRep PCE file"
)
RESERVED_HELP = (
    "price at the reserved rate (discounted_dph_total; search with `vastai search offers --reserved`)"
)
FAIL_HELP = f"regression limits, e.g. throughput:5%%,rss_peak:10%% (metrics: {', '.join(METRICS)})"
HOST_HELP = "a host fingerprint (or its start) or a run label"
FIGURES_HELP = f"the figures to search, comma-separated. Default: all of {','.join(METRICS)}"
MAX_P_HELP = (
    f"p-value a change must be below in Student's t-test, its runs counted as the fewer independent "
    f"ones that runs drifting together are worth. Default: {MAX_P:g}, Apache Otava's: of 30-run series "
    "without a change, under 1%% show one where runs vary independently, 2 to 3%% where a host drifts"
)
MIN_RUNS_HELP = f"runs each side of a change at the least. Default: {MIN_RUNS}"
FAIL_WORSE_HELP = (
    "the history check for a branch's runs: exit 1 when a series' newest change (the one its latest "
    "run is after) is worse than the figure's limit, its 95%% interval wholly beyond it, naming the "
    "build after which it moved; e.g. throughput:5%%,p50:10%%. A change beyond the limit whose "
    "interval reaches within it is reported, not failed. Only figures --figures searches"
)
CSV_HELP = (
    "also write the series in Apache Otava's CSV (a `csv` test reads it as is): columns time (run start, "
    "ISO 8601 UTC), one per figure in its stored unit, then build, run_id, host, fingerprint; one file "
    "per test case and host: FILE itself for one, else FILE-KIND-batchB-jJ-HOST.csv beside it. Otava's "
    "t-test takes runs as independent: where a host drifts it may mark changes this does not"
)
DB_HELP = (
    "sqlite:///PATH, a file path or postgresql://... Default: $PYTEST_CUZK_RESULTS_DB, else the user data dir"
)


def parse_figures(text: str) -> list[str]:
    """Figure names from ``throughput,p50``, each one of METRICS."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if unknown := [n for n in names if n not in METRICS]:
        raise argparse.ArgumentTypeError(f"unknown figure {unknown[0]!r}: use {', '.join(METRICS)}")
    if not names:
        raise argparse.ArgumentTypeError(f"no figure named: use {', '.join(METRICS)}")
    return names


def _p_value(text: str) -> float:
    try:
        if 0 < (value := float(text)) < 1:
            return value
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"invalid p-value {text!r}: a number between 0 and 1, e.g. 0.001")


def _runs(text: str) -> int:
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise argparse.ArgumentTypeError(f"invalid run count {text!r}: a whole number of runs, 1 or more")


def _kind(text: str) -> str:
    try:
        return by_name(text).name
    except UnknownKind as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """Set up the ``cuzk-perf`` parser; ``--db`` belongs to every subcommand."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", metavar="URL", default=os.environ.get("PYTEST_CUZK_RESULTS_DB"), help=DB_HELP)
    parser = argparse.ArgumentParser(prog="cuzk-perf", description=__doc__.split("\n\n")[0], epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(func: Callable[[ResultsDB, argparse.Namespace], int], kind_required: bool = False) -> Any:
        doc = (func.__doc__ or "").strip()
        p = sub.add_parser(func.__name__[4:], parents=[common], help=doc, description=doc, epilog=EPILOG)
        p.set_defaults(func=func)
        if func is not cmd_example:
            p.add_argument("--kind", type=_kind, required=kind_required, help="porep, snap, wpost or winning")
        return p

    add(cmd_hosts)
    add(cmd_history, kind_required=True).add_argument("--host", metavar="FP_OR_LABEL", help=HOST_HELP)
    p = add(cmd_compare)
    p.add_argument("build_a", metavar="BUILD_A", help="baseline build (its name or a unique part of it)")
    p.add_argument("build_b", metavar="BUILD_B", help="candidate build")
    p.add_argument("--fail", type=parse_fail, default={}, metavar="METRIC:PCT,...", help=FAIL_HELP)
    p.add_argument("--host", metavar="FP_OR_LABEL", help=HOST_HELP)
    p = add(cmd_changes)
    p.add_argument("--host", metavar="FP_OR_LABEL", help=f"{HOST_HELP}. Default: every host, each a series")
    p.add_argument("--figures", type=parse_figures, default=list(METRICS), metavar="A,B", help=FIGURES_HELP)
    p.add_argument("--max-p", type=_p_value, default=MAX_P, metavar="P", help=MAX_P_HELP)
    p.add_argument("--min-runs", type=_runs, default=MIN_RUNS, metavar="N", help=MIN_RUNS_HELP)
    p.add_argument("--csv", metavar="FILE", help=CSV_HELP)
    p.add_argument(
        "--fail-worse",
        type=_limits("--fail-worse"),
        default={},
        metavar="METRIC:PCT,...",
        help=FAIL_WORSE_HELP,
    )
    p = add(cmd_export)
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.add_argument("-o", "--output", metavar="FILE", help="Default: standard output")
    p.add_argument("--build")
    p.add_argument("--host", metavar="FP_OR_LABEL", help=HOST_HELP)
    add(cmd_plot).add_argument("-o", "--output", metavar="DIR", required=True)
    p = add(cmd_recommend)
    p.add_argument("--ram", type=_size("--ram"), required=True, help="the host's RAM, e.g. 256GiB or 512GB")
    p.add_argument("--margin", type=parse_percent, default=0.15, help=MARGIN_HELP)
    p.add_argument("--gpu", metavar="MODEL", help=GPU_HELP)
    p = add(cmd_offers)
    p.add_argument("file", metavar="FILE", help=OFFERS_HELP)
    p.add_argument(
        "--max-dph", type=_dollars, metavar="DOLLARS", help="only offers up to this price per hour"
    )
    p.add_argument(
        "--min-ram", type=_size("--min-ram"), metavar="SIZE", help="only offers with this much RAM"
    )
    p.add_argument("--gpu", metavar="MODEL", help=GPU_HELP)
    p.add_argument("--margin", type=parse_percent, default=0.15, help=MARGIN_HELP)
    p.add_argument("--disk", type=_size("--disk"), default=DISK, metavar="SIZE", help=DISK_HELP)
    p.add_argument("--reserved", action="store_true", help=RESERVED_HELP)
    p.add_argument("--json", action="store_true", help="a JSON list of the ranked rows, for scripts")
    add(cmd_example).add_argument("--offers", metavar="FILE", required=True, help="where to write its offers")
    p = add(cmd_report)
    p.add_argument("--html", metavar="PATH", required=True, help="the page to write")
    p.add_argument("--fail", type=parse_fail, default={}, metavar="METRIC:PCT,...", help=FAIL_HELP)
    return parser


def _open(url: str | None, create: bool) -> ResultsDB:
    try:
        return ResultsDB(url, create=create)
    except FileNotFoundError as exc:
        raise PerfError(str(exc)) from None
    except (ValueError, RuntimeError, sa.exc.SQLAlchemyError) as exc:
        raise PerfError(f"cannot open the results database {url or '(default)'}: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``cuzk-perf``; returns the exit code instead of exiting, so tests can call it.

    Every failure a user can act on is a ``PerfError``, printed here after the subcommand's name.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        with _open(args.db, create=args.func is cmd_example) as db:  # the others only read
            return int(args.func(db, args))
    except PerfError as exc:
        print(f"cuzk-perf {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        # The reader stopped reading (``| head``): end quietly, and let no flush at exit fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
