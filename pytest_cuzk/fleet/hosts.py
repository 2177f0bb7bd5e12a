"""``cuzk-perf hosts``, ``history`` and ``recommend``: choosing hosts and configurations by measurement."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass

from pytest_cuzk.fleet.gpus import matches
from pytest_cuzk.fleet.queries import (
    NO_DATA,
    best_pool,
    config,
    figure,
    gpu_memory,
    gpus,
    group,
    joined,
    labels,
    machine,
    shown,
    spread,
)
from pytest_cuzk.measure.figures import METRICS
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import ResultRow
from pytest_cuzk.sinks.tables import table
from pytest_cuzk.vocab.units import format_bytes

__all__ = ["HISTORY", "cmd_history", "cmd_hosts", "cmd_recommend", "history", "ranking"]

HISTORY = ("throughput", "p50", "p90", "max", "rss_peak", "vram_peak")  # the figures a history row shows


def ranking(rows: list[ResultRow]) -> Iterator[tuple[str, list[ResultRow], list[ResultRow]]]:
    """Each kind on each machine: its tests, and its best pool (the build and configuration that did best)."""
    for (kind, _), machine_rows in group(rows, lambda r: (r.test.kind, machine(r))).items():
        yield kind, machine_rows, best_pool(machine_rows)


def cmd_hosts(db: ResultsDB, args: argparse.Namespace) -> int:
    """Best proofs/hour per kind per machine: its best build and configuration, their runs and spread."""
    out = []
    for kind, rows, pool in ranking(db.rows(kind=args.kind)):
        top = pool[0]
        out.append((
            kind, joined(r.run.label for r in rows), joined(r.run.host.hostname for r in rows),
            joined(r.run.host_id for r in rows), top.run.host.fingerprint[:12], gpus(top),
            format_bytes(top.run.host.ram_bytes), len({r.run.run_id for r in pool}),
            shown(pool, "throughput"), spread(pool), top.run.daemon_build, config(top),
            figure(pool, "throughput") or 0.0,
        ))  # fmt: skip
    out.sort(key=lambda t: (t[0], -t[-1]))
    heads = ("kind", "label", "hostname", "machine id", "fingerprint", "gpus", ">ram", ">runs", ">best/h",
             ">spread/h", "best build", "best config")  # fmt: skip
    print(table(heads, [t[:-1] for t in out]) if out else NO_DATA)
    return 0


def history(rows: list[ResultRow]) -> dict[tuple[str, tuple[str, str], str], list[ResultRow]]:
    """The pools a history shows: each build's tests on each machine in each configuration."""
    return group(rows, lambda r: (r.run.daemon_build, machine(r), config(r)))


def cmd_history(db: ResultsDB, args: argparse.Namespace) -> int:
    """Each build's figures on each host and configuration, in the order the builds were first run."""
    out = []
    for (build, _, _), rs in history(db.rows(kind=args.kind, host=args.host)).items():
        when, test = min(r.run.started_at for r in rs), rs[0].test
        order = (when, build, labels(rs), test.batch_size, test.concurrency)
        runs = len({r.run.run_id for r in rs})
        out.append((order, [when.strftime("%Y-%m-%d %H:%M"), *order[1:], runs, spread(rs)]))
        out[-1][1].extend(shown(rs, m) for m in HISTORY)
    out.sort(key=lambda t: t[0])
    heads = ("first run (UTC)", "build", "host", ">batch", ">j", ">runs", ">spread/h",
             *(f">{METRICS[m].label}" for m in HISTORY))  # fmt: skip
    print(table(heads, [row for _, row in out]) if out else NO_DATA)
    return 0


@dataclass(frozen=True)
class Candidate:
    """A measured configuration of one kind: its pooled RSS peak and throughput over every run of it."""

    batch: int
    j: int
    peak: int
    per_hour: float
    hosts: int


def candidates(rows: list[ResultRow]) -> list[Candidate]:
    out = []
    for (b, j), crs in sorted(group(rows, lambda r: (r.test.batch_size, r.test.concurrency)).items()):
        hosts = len({r.run.host.fingerprint for r in crs})
        peak, per_hour = figure(crs, "rss_peak"), figure(crs, "throughput")
        out.append(Candidate(b, j, int(peak or 0), per_hour or 0.0, hosts))
    return out


def recommend_kind(kind: str, cands: list[Candidate], budget: float) -> Candidate | None:
    """Print the candidates of one kind and return the fastest that fits ``budget``."""
    fits = [c for c in cands if c.peak <= budget]
    pick = max(fits, key=lambda c: (c.per_hour, -c.peak)) if fits else None
    rss, tput = METRICS["rss_peak"], METRICS["throughput"]
    heads = ("kind", ">batch", ">j", f">{rss.label}", f">{tput.label}", ">hosts", "fits", "pick")
    print(table(heads, [
        (kind, c.batch, c.j, rss.fmt(c.peak), tput.fmt(c.per_hour), c.hosts, "yes" if c in fits else "no",
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
            tput = METRICS["throughput"].fmt(pick.per_hour)
            print(f"{kind}: use batch size {pick.batch}, concurrency {pick.j} "
                  f"({tput} proofs/hour, RSS peak {format_bytes(pick.peak)})\n")  # fmt: skip
            continue
        low = min(cands, key=lambda c: c.peak)
        need = format_bytes(low.peak / (1 - args.margin))
        print(f"{kind}: nothing measured fits; the smallest peak is {format_bytes(low.peak)} "
              f"(batch {low.batch}, j {low.j}), which needs {need} of RAM\n")  # fmt: skip
        status = 1
    return status
