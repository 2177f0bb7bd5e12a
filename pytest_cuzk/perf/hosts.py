"""``cuzk-perf hosts``, ``history`` and ``recommend``: choosing hosts and configurations by measurement."""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass

from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import ResultRow
from pytest_cuzk.sinks.tables import table

from ..wire.units import format_bytes
from .gpus import matches
from .queries import NO_DATA, best, config, gpu_memory, gpus, group, joined, labels, machine, stat, values

__all__ = ["cmd_history", "cmd_hosts", "cmd_recommend"]


def cmd_hosts(db: ResultsDB, args: argparse.Namespace) -> int:
    """Best proofs/hour per kind per machine, with how many runs and how far they spread."""
    out = []
    for (kind, _), rows in group(db.rows(kind=args.kind), lambda r: (r.test.kind, machine(r))).items():
        tput, top = values(rows, "throughput") or [0.0], best(rows)
        runs, spread = len({r.run.run_id for r in rows}), f"{min(tput):.1f}..{max(tput):.1f}"
        out.append((
            kind, joined(r.run.label for r in rows), joined(r.run.host.hostname for r in rows),
            joined(r.run.host_id for r in rows), top.run.host.fingerprint[:12], gpus(top),
            format_bytes(top.run.host.ram_bytes), runs, f"{max(tput):.1f}", spread, config(top),
        ))  # fmt: skip
    out.sort(key=lambda t: (t[0], -float(t[8])))
    heads = ("kind", "label", "hostname", "machine id", "fingerprint", "gpus", ">ram", ">runs", ">best/h",
             ">spread/h", "best config")  # fmt: skip
    print(table(heads, out) if out else NO_DATA)
    return 0


def _build_machine_config(r: ResultRow) -> tuple[str, tuple[str, str], int, int]:
    return r.run.daemon_build, machine(r), r.test.batch_size, r.test.concurrency


def cmd_history(db: ResultsDB, args: argparse.Namespace) -> int:
    """Each build's figures on each host and configuration, in the order the builds were first run."""
    rows = db.rows(kind=args.kind, host=args.host)
    out = []
    for (build, _, batch, j), rs in group(rows, _build_machine_config).items():
        tput, p50, rss = (values(rs, m) for m in ("throughput", "p50", "rss_peak"))
        when = min(r.run.started_at for r in rs)
        runs = len({r.run.run_id for r in rs})
        figures = [stat(max, tput, "{:.1f}".format), stat(statistics.median, tput, "{:.1f}".format)]
        figures += [stat(statistics.median, p50, "{:.2f}".format), stat(max, rss, format_bytes)]
        out.append((when, build, labels(rs), batch, j, runs, *figures))
    out.sort(key=lambda t: t[:5])
    shown = [(t[0].strftime("%Y-%m-%d %H:%M"), *t[1:]) for t in out]
    heads = ("first run (UTC)", "build", "host", ">batch", ">j", ">runs", ">best/h", ">median/h", ">p50 s",
             ">rss peak")  # fmt: skip
    print(table(heads, shown) if out else NO_DATA)
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
    heads = ("kind", ">batch", ">j", ">rss peak", ">median/h", ">hosts", "fits", "pick")
    print(table(heads, [
        (kind, c.batch, c.j, format_bytes(c.peak), f"{c.per_hour:.1f}", c.hosts, "yes" if c in fits else "no",
         "<- best" if c == pick else "")
        for c in cands
    ]))  # fmt: skip
    return pick


def cmd_recommend(db: ResultsDB, args: argparse.Namespace) -> int:
    """The batch size and concurrency with the best throughput whose measured peak fits the RAM."""
    rows = [r for r in db.rows(kind=args.kind) if r.test.rss_peak_bytes is not None]
    if args.gpu:
        rows = [r for r in rows if any(matches(args.gpu, g, gpu_memory(r)) for g in r.run.host.gpu_models)]
    if not rows:
        print(NO_DATA)
        return 0
    budget = args.ram * (1 - args.margin)
    less = f"{args.margin * 100:g}%"
    print(f"RAM {format_bytes(args.ram)} less {less}: peaks must stay under {format_bytes(budget)}")
    status = 0
    for kind, krows in sorted(group(rows, lambda r: r.test.kind).items()):
        cands = candidates(krows)
        pick = recommend_kind(kind, cands, budget)
        if pick:
            print(f"{kind}: use batch size {pick.batch}, concurrency {pick.j} "
                  f"({pick.per_hour:.1f} proofs/hour, RSS peak {format_bytes(pick.peak)})\n")  # fmt: skip
            continue
        low = min(cands, key=lambda c: c.peak)
        need = format_bytes(low.peak / (1 - args.margin))
        print(f"{kind}: nothing measured fits; the smallest peak is {format_bytes(low.peak)} "
              f"(batch {low.batch}, j {low.j}), which needs {need} of RAM\n")  # fmt: skip
        status = 1
    return status
