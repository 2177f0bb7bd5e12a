"""cuzk-perf: read the results database to choose hosts, follow builds and gate regressions offline.

Why: specs do not predict proving throughput, so hosts are chosen by what they measured; and
pytest-benchmark can gate timings but not throughput or memory across builds after the fact.

Every subcommand takes ``--db URL`` (default: ``$PYTEST_CUZK_RESULTS_DB``, else the SQLite file in
the user's data dir, see ``pytest_cuzk.results``). Exit codes: 0 done (also "no data"), 1 a
regression (``compare``) or nothing fits the RAM (``recommend``), 2 a usage error.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import os
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from .results import ResultRow, ResultsDB
from .wire import units
from .wire.kinds import by_name

__all__ = ["METRICS", "Metric", "main", "parse_fail", "parse_percent"]

NO_DATA = "no data"
GIB = 2**30


def fmt_bytes(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


@dataclass(frozen=True)
class Metric:
    """A figure ``compare`` weighs: how runs of one build combine, and which way is worse."""

    field: str
    combine: Callable[[list[float]], float]
    higher_is_better: bool
    fmt: Callable[[float], str]


METRICS: dict[str, Metric] = {
    "throughput": Metric("proofs_per_hour", statistics.median, True, lambda v: f"{v:.1f}/h"),
    "p50": Metric("p50_s", statistics.median, False, lambda v: f"{v:.2f} s"),
    # Peaks combine by max: the worst run is the one that runs out of memory.
    "rss_peak": Metric("rss_peak_bytes", max, False, fmt_bytes),
    "vram_peak": Metric("vram_peak_bytes", max, False, fmt_bytes),
}


def parse_percent(text: str) -> float:
    """Fraction from ``15%`` (or ``15``), for a margin: below 100%."""
    try:
        value = units.parse_percent(text, "the option")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value >= 100:
        raise argparse.ArgumentTypeError(f"percentage {text!r} out of range: use 0% to 99%")
    return value / 100


def parse_fail(text: str) -> dict[str, float]:
    """Thresholds as fractions from ``throughput:5%,rss_peak:10%`` (--cuzk-compare-fail's syntax)."""
    try:
        return {name: pct / 100 for name, pct in units.parse_thresholds(text, METRICS, "--fail").items()}
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _size(text: str) -> int:
    try:
        return units.parse_size(text, "--ram")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Aligned text table; a header starting with ``>`` marks a right-aligned (numeric) column."""
    right = [h.startswith(">") for h in headers]
    cells = [[h.removeprefix(">") for h in headers], *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True))

    return "\n".join(
        x.rstrip() for x in [line(cells[0]), line(["-" * w for w in widths]), *map(line, cells[1:])]
    )


def gpus(row: ResultRow) -> str:
    models = sorted(set(row.run.host.gpu_models)) or ["no GPU"]
    return f"{row.run.host.gpu_count}x {'/'.join(models)}"


def group(rows: Iterable[ResultRow], key: Callable[[ResultRow], Any]) -> dict[Any, list[ResultRow]]:
    out: dict[Any, list[ResultRow]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return out


def values(rows: Iterable[ResultRow], metric: str) -> list[float]:
    return [v for r in rows if (v := getattr(r.test, METRICS[metric].field)) is not None]


def config(row: ResultRow) -> str:
    return f"batch{row.test.batch_size}-j{row.test.concurrency}"


def best(rows: list[ResultRow]) -> ResultRow:
    return max(rows, key=lambda r: r.test.proofs_per_hour or 0.0)


def labels(rows: list[ResultRow]) -> str:
    return ",".join(sorted({r.run.label for r in rows if r.run.label})) or rows[0].run.host.fingerprint[:12]


def stat(fn: Callable[[list[float]], float], vals: list[float], fmt: Callable[[float], str]) -> str:
    return fmt(fn(vals)) if vals else "-"


def cmd_hosts(db: ResultsDB, args: argparse.Namespace) -> int:
    """Best proofs/hour per kind per host, with how many runs and how far they spread."""
    out = []
    for (kind, fp), rows in group(
        db.rows(kind=args.kind), lambda r: (r.test.kind, r.run.host.fingerprint)
    ).items():
        tput, top = values(rows, "throughput") or [0.0], best(rows)
        runs = len({r.run.run_id for r in rows})
        ram, spread = fmt_bytes(top.run.host.ram_bytes), f"{min(tput):.1f}..{max(tput):.1f}"
        out.append(
            (kind, fp[:12], labels(rows), gpus(top), ram, runs, f"{max(tput):.1f}", spread, config(top))
        )
    out.sort(key=lambda t: (t[0], -float(t[6])))
    heads = ("kind", "host", "labels", "gpus", ">ram", ">runs", ">best/h", ">spread/h", "best config")
    print(table(heads, out) if out else NO_DATA)
    return 0


def cmd_history(db: ResultsDB, args: argparse.Namespace) -> int:
    """Each build's figures on each host, in the order the builds were first run."""
    rows = db.rows(kind=args.kind, host=args.host)
    out = []
    for (build, _), rs in group(rows, lambda r: (r.run.daemon_build, r.run.host.fingerprint)).items():
        tput, p50, rss = (values(rs, m) for m in ("throughput", "p50", "rss_peak"))
        when = rs[0].run.started_at.strftime("%Y-%m-%d %H:%M")
        runs = len({r.run.run_id for r in rs})
        figures = [stat(max, tput, "{:.1f}".format), stat(statistics.median, tput, "{:.1f}".format)]
        figures += [stat(statistics.median, p50, "{:.2f}".format), stat(max, rss, fmt_bytes)]
        out.append((when, build, labels(rs), runs, *figures))
    heads = ("first run (UTC)", "build", "host", ">runs", ">best/h", ">median/h", ">p50 s", ">rss peak")
    print(table(heads, out) if out else NO_DATA)
    return 0


def resolve_build(db: ResultsDB, name: str) -> str:
    """The stored build named exactly, or by a unique part of its name (a sha256 is long to type)."""
    known = [b for b, _, _ in db.builds()]
    hits = [b for b in known if b == name] or [b for b in known if name in b]
    if len(hits) == 1:
        return hits[0]
    why = "is ambiguous" if hits else "is not in the database"
    listing = "\n".join(f"  {b}" for b in (hits or known)) or "  (none)"
    raise LookupError(f"build {name!r} {why}; known builds:\n{listing}")


def compare_rows(
    a: list[ResultRow], b: list[ResultRow], limits: dict[str, float]
) -> tuple[list[list[str]], list[str]]:
    """Table rows and regression messages for each kind/batch/j both builds measured on the same host.

    Only the same host is compared: another host's figures would measure the hardware, not the build.
    """
    ga, gb = (
        group(x, lambda r: (r.test.kind, r.test.batch_size, r.test.concurrency, r.run.host.fingerprint))
        for x in (a, b)
    )
    out, failures = [], []
    for key in sorted(ga.keys() & gb.keys()):
        kind, batch, j, host = (*key[:3], labels(ga[key] + gb[key]))
        for name, m in METRICS.items():
            va, vb = values(ga[key], name), values(gb[key], name)
            if not va or not vb:
                continue
            x, y = m.combine(va), m.combine(vb)
            delta = (y - x) / x if x else 0.0
            limit = limits.get(name)
            bad = limit is not None and (-delta if m.higher_is_better else delta) > limit
            shown = "-" if limit is None else f"{'-' if m.higher_is_better else '+'}{limit:.0%}"
            verdict = "REGRESSION" if bad else "ok"
            out.append(
                [kind, str(batch), str(j), host, name, m.fmt(x), m.fmt(y), f"{delta:+.1%}", shown, verdict]
            )
            if bad:
                failures.append(
                    f"REGRESSION {kind} batch{batch}-j{j} on {host} {name}: A {m.fmt(x)} -> B {m.fmt(y)} "
                    f"({delta:+.1%}, limit {shown})"
                )
    return out, failures


def cmd_compare(db: ResultsDB, args: argparse.Namespace) -> int:
    """Per-kind deltas from build A to build B; exit 1 on a regression beyond a --fail threshold."""
    try:
        names = [resolve_build(db, n) for n in (args.build_a, args.build_b)]
    except LookupError as exc:
        print(f"cuzk-perf compare: {exc}", file=sys.stderr)
        return 2
    a, b = (db.rows(build=n, kind=args.kind, host=args.host) for n in names)
    out, failures = compare_rows(a, b, args.fail)
    if not out:
        print(f"cuzk-perf compare: {names[0]!r} and {names[1]!r} share no kind/batch/j measured on one host")
        return 2
    print(f"A = {names[0]}\nB = {names[1]}")
    print(table(("kind", ">batch", ">j", "host", "metric", ">A", ">B", ">delta", ">limit", "verdict"), out))
    print("\n".join(failures) if failures else "no regression beyond the thresholds")
    return 1 if failures else 0


def flat(row: ResultRow) -> dict[str, Any]:
    """One test as a flat record: test fields, then run_* and host_* fields."""
    run = dataclasses.asdict(row.run)
    host = run.pop("host")
    out = dataclasses.asdict(row.test)
    out.update({f"run_{k}": v for k, v in run.items() if k != "run_id"})
    out.update({f"host_{k}": v for k, v in host.items()})
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in out.items()}


def cmd_export(db: ResultsDB, args: argparse.Namespace) -> int:
    """Every stored test, flat, for spreadsheets and notebooks."""
    rows = [flat(r) for r in db.rows(kind=args.kind, build=args.build, host=args.host)]
    buf = io.StringIO()
    if args.format == "json":
        json.dump(rows, buf, indent=2)
        buf.write("\n")
    elif rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        for r in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()})
    if args.output:
        Path(args.output).write_text(buf.getvalue())
        print(f"wrote {len(rows)} tests to {args.output}")
    else:
        sys.stdout.write(buf.getvalue())
    return 0


def tops(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """The best test of each kind on each host."""
    return [best(rs) for rs in group(rows, lambda r: (r.test.kind, r.run.host.fingerprint)).values()]


def _plot_ram(ax: Any, rows: list[ResultRow], _builds: list[str]) -> None:
    top = tops(rows)
    ram = [t.run.host.ram_bytes / GIB for t in top]
    ax.scatter(ram, [t.test.proofs_per_hour or 0 for t in top])
    for t, x in zip(top, ram, strict=True):
        ax.annotate(t.run.label or gpus(t), (x, t.test.proofs_per_hour or 0), fontsize=7)
    ax.set(xlabel="host RAM (GiB)")


def _plot_gpu(ax: Any, rows: list[ResultRow], _builds: list[str]) -> None:
    by_gpu = group(tops(rows), gpus)
    names = sorted(by_gpu)
    ax.bar(names, [best(by_gpu[n]).test.proofs_per_hour or 0 for n in names])
    ax.tick_params(axis="x", labelsize=7)


def _plot_trend(ax: Any, rows: list[ResultRow], builds: list[str]) -> None:
    for host, series in sorted(group(rows, lambda r: r.run.label or gpus(r)).items()):
        per_build = group(series, lambda r: r.run.daemon_build)
        xs = [i for i, b in enumerate(builds) if b in per_build]
        ax.plot(
            xs, [best(per_build[builds[i]]).test.proofs_per_hour or 0 for i in xs], marker="o", label=host
        )
    ax.set_xticks(range(len(builds)), [b[:20] for b in builds], rotation=20, ha="right", fontsize=7)
    ax.legend(fontsize=7)


CHARTS = {
    "throughput_vs_ram.png": (_plot_ram, "best proofs/hour against host RAM"),
    "throughput_vs_gpu.png": (_plot_gpu, "best proofs/hour by GPU"),
    "trend.png": (_plot_trend, "best proofs/hour per host over builds, oldest first"),
}


def cmd_plot(db: ResultsDB, args: argparse.Namespace) -> int:
    """PNG charts, one panel per kind: throughput against host RAM, against GPU, and across builds."""
    by_kind = sorted(group(db.rows(kind=args.kind), lambda r: r.test.kind).items())
    if not by_kind:
        print(NO_DATA)
        return 0
    from matplotlib.figure import Figure  # slow import; a bare Figure renders through Agg, no display needed

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    builds = [b for b, _, _ in db.builds() if any(r.run.daemon_build == b for _, rs in by_kind for r in rs)]
    for name, (draw, title) in CHARTS.items():
        fig = Figure(figsize=(8, 1 + 3 * len(by_kind)), layout="constrained")
        fig.suptitle(title)
        for ax, (kind, rows) in zip(fig.subplots(len(by_kind), 1, squeeze=False)[:, 0], by_kind, strict=True):
            draw(ax, rows, builds)
            ax.set_ylabel(f"{kind} proofs/hour")
        fig.savefig(out / name, dpi=100)
        print(f"wrote {out / name}")
    return 0


@dataclass(frozen=True)
class Candidate:
    """A measured configuration of one kind: its worst RSS peak and its typical throughput."""

    batch: int
    j: int
    peak: int
    per_hour: float
    hosts: int


def candidates(rows: list[ResultRow]) -> list[Candidate]:
    out = []
    for (b, j), crs in sorted(group(rows, lambda r: (r.test.batch_size, r.test.concurrency)).items()):
        tput = statistics.median(values(crs, "throughput") or [0.0])
        hosts = len({r.run.host.fingerprint for r in crs})
        out.append(Candidate(b, j, int(max(values(crs, "rss_peak"))), tput, hosts))
    return out


def recommend_kind(kind: str, cands: list[Candidate], budget: float) -> Candidate | None:
    """Print the candidates of one kind and return the fastest that fits ``budget``."""
    fits = [c for c in cands if c.peak <= budget]
    pick = max(fits, key=lambda c: (c.per_hour, -c.peak)) if fits else None
    heads = ("kind", ">batch", ">j", ">rss peak", ">median/h", ">hosts", "fits", "")
    print(table(heads, [
        (kind, c.batch, c.j, fmt_bytes(c.peak), f"{c.per_hour:.1f}", c.hosts, "yes" if c in fits else "no",
         "<- best" if c == pick else "")
        for c in cands
    ]))  # fmt: skip
    return pick


def cmd_recommend(db: ResultsDB, args: argparse.Namespace) -> int:
    """The batch size and concurrency with the best throughput whose measured peak fits the RAM."""
    gpu = (args.gpu or "").lower()
    rows = [r for r in db.rows(kind=args.kind) if r.test.rss_peak_bytes is not None]
    rows = [r for r in rows if any(gpu in g.lower() for g in r.run.host.gpu_models or [""])]
    if not rows:
        print(NO_DATA)
        return 0
    budget = args.ram * (1 - args.margin)
    print(f"RAM {fmt_bytes(args.ram)} less {args.margin:.0%}: peaks must stay under {fmt_bytes(budget)}")
    status = 0
    for kind, krows in sorted(group(rows, lambda r: r.test.kind).items()):
        cands = candidates(krows)
        pick = recommend_kind(kind, cands, budget)
        if pick:
            print(f"{kind}: use batch size {pick.batch}, concurrency {pick.j} "
                  f"({pick.per_hour:.1f} proofs/hour, RSS peak {fmt_bytes(pick.peak)})\n")  # fmt: skip
            continue
        low = min(cands, key=lambda c: c.peak)
        need = fmt_bytes(low.peak / (1 - args.margin))
        print(f"{kind}: nothing measured fits; the smallest peak is {fmt_bytes(low.peak)} "
              f"(batch {low.batch}, j {low.j}), which needs {need} of RAM\n")  # fmt: skip
        status = 1
    return status


EPILOG = "exit codes: 0 done (also 'no data'), 1 regression / nothing fits the RAM, 2 usage error"
FAIL_HELP = f"regression limits, e.g. throughput:5%%,rss_peak:10%% (metrics: {', '.join(METRICS)})"
HOST_HELP = "a host fingerprint (or its start) or a run label"
DB_HELP = (
    "sqlite:///PATH, a file path or postgresql://... Default: $PYTEST_CUZK_RESULTS_DB, else the user data dir"
)


def _kind(text: str) -> str:
    try:
        return by_name(text).name
    except KeyError as exc:
        raise argparse.ArgumentTypeError(str(exc.args[0])) from None


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
        p.add_argument("--kind", type=_kind, required=kind_required, help="porep, snap, wpost or winning")
        return p

    add(cmd_hosts)
    add(cmd_history, kind_required=True).add_argument("--host", metavar="FP_OR_LABEL", help=HOST_HELP)
    p = add(cmd_compare)
    p.add_argument("build_a", metavar="BUILD_A", help="baseline build (its name or a unique part of it)")
    p.add_argument("build_b", metavar="BUILD_B", help="candidate build")
    p.add_argument("--fail", type=parse_fail, default={}, metavar="METRIC:PCT,...", help=FAIL_HELP)
    p.add_argument("--host", metavar="FP_OR_LABEL", help=HOST_HELP)
    p = add(cmd_export)
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.add_argument("-o", "--output", metavar="FILE", help="Default: standard output")
    p.add_argument("--build")
    p.add_argument("--host", metavar="FP_OR_LABEL", help=HOST_HELP)
    add(cmd_plot).add_argument("-o", "--output", metavar="DIR", required=True)
    p = add(cmd_recommend)
    p.add_argument("--ram", type=_size, required=True, help="the host's RAM, e.g. 256GiB or 512GB")
    p.add_argument("--margin", type=parse_percent, default=0.15, help="safety margin. Default: 15%%")
    p.add_argument("--gpu", metavar="MODEL", help="only hosts with a GPU whose name contains MODEL")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``cuzk-perf``; returns the exit code instead of exiting, so tests can call it."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        db = ResultsDB(args.db)
    except (ValueError, RuntimeError, sa.exc.SQLAlchemyError) as exc:
        print(f"cuzk-perf: cannot open the results database {args.db or '(default)'}: {exc}", file=sys.stderr)
        return 2
    with db:
        return args.func(db, args)
