"""``cuzk-perf compare``: one build against another on the same host, with ``--fail`` limits.

It judges a change as the pytest gate does (``comparison``): between each build's pooled
figure (``queries.figure``, as every view pools runs), failed when beyond the limit and
significant on the runs' pooled per-proof samples; a build whose runs stored no samples is
compared as measured and reported as untested.
"""

from __future__ import annotations

import argparse

from pytest_cuzk.fleet.errors import PerfError
from pytest_cuzk.fleet.queries import figure, group, labels
from pytest_cuzk.measure.figures import METRICS, Samples
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import ResultRow
from pytest_cuzk.sinks.tables import table
from pytest_cuzk.verdicts.comparison import Side, compare
from pytest_cuzk.vocab.daemonconfig import config_changes

__all__ = ["cmd_compare", "compare_rows", "resolve_build"]


def resolve_build(db: ResultsDB, name: str) -> str:
    """The stored build named exactly, or by a unique part of its name (a sha256 is long to type)."""
    known = [b for b, _, _ in db.builds()]
    hits = [b for b in known if b == name] or [b for b in known if name in b]
    if len(hits) == 1:
        return hits[0]
    why = "is ambiguous" if hits else "is not in the database"
    listing = "\n".join(f"  {b}" for b in (hits or known)) or "  (none)"
    raise PerfError(f"build {name!r} {why}; known builds:\n{listing}")


def _side(rows: list[ResultRow], name: str) -> Side:
    """A build's pooled figure over its runs, and their pooled samples to test when every run stored them."""
    parts = [Samples.from_dict(r.test.samples) for r in rows if r.test.samples]
    pooled = Samples.pooled(parts) if parts and len(parts) == len(rows) else None
    return Side(figure(rows, name), pooled)


def compare_rows(
    a: list[ResultRow], b: list[ResultRow], limits: dict[str, float]
) -> tuple[list[list[str]], list[str], list[str]]:
    """Table rows, regressions and unproven changes per kind/batch/j that both builds ran on one host.

    ``limits`` are percentages by metric name, as ``--cuzk-compare-fail`` takes them, and are
    judged as the gate judges them (``comparison``). Only the same host is compared: another
    host's figures would measure the hardware, not the build.
    """
    ga, gb = (
        group(x, lambda r: (r.test.kind, r.test.batch_size, r.test.concurrency, r.run.host.fingerprint))
        for x in (a, b)
    )
    out: list[list[str]] = []
    failures: list[str] = []
    unproven: list[str] = []
    for key in sorted(ga.keys() & gb.keys()):
        kind, batch, j, _ = key
        host = labels(ga[key] + gb[key])
        for name, m in METRICS.items():
            change = compare(m, _side(ga[key], name), _side(gb[key], name), limits.get(name))
            if change.worse_pct is None:
                continue
            delta = f"{change.signed(change.worse_pct):+.1f}%"
            limit = change.limit
            shown = "-" if limit is None else f"{'-' if m.higher_is_better else '+'}{limit:g}%"
            a_, b_ = m.show(change.before), m.show(change.after)
            evidence = change.evidence(signed=True)
            out.append([kind, str(batch), str(j), host, name, a_, b_, delta, evidence, shown, change.verdict])
            what = f"{kind} batch{batch}-j{j} on {host} {name}"
            line = f"{what}: A {a_} -> B {b_} ({delta}, {evidence}, limit {shown})"
            if change.verdict == "regressed":
                failures.append(f"REGRESSION {line}")
            elif change.verdict in ("not significant", "confounded") or (
                change.verdict == "undecided" and change.worse_pct > 0
            ):
                unproven.append(f"{change.verdict}, not failed: {line}")
    return out, failures, unproven


def _config(build: str, rows: list[ResultRow]) -> dict[str, dict[str, str]]:
    """The build's config keys as its runs recorded them (none before configs were recorded)."""
    recorded = [keys for r in rows if isinstance(keys := r.run.extra.get("daemon_config"), dict)]
    return {build: recorded[0]} if recorded else {}


def cmd_compare(db: ResultsDB, args: argparse.Namespace) -> int:
    """Per-kind deltas from build A to build B; exit 1 on a significant regression beyond a --fail limit."""
    names = [resolve_build(db, n) for n in (args.build_a, args.build_b)]
    a, b = (db.rows(build=n, kind=args.kind, host=args.host) for n in names)
    out, failures, unproven = compare_rows(a, b, args.fail)
    if not out:
        raise PerfError(f"{names[0]!r} and {names[1]!r} share no kind/batch/j measured on one host")
    print(f"A = {names[0]}\nB = {names[1]}")
    if changes := config_changes(_config(names[0], a), _config(names[1], b)):
        print(f"one binary, two configs: {'; '.join(changes)}")
    heads = ("kind", ">batch", ">j", "host", "metric", ">A", ">B", ">delta", "evidence", ">limit", "verdict")
    print(table(heads, out))
    for line in unproven + failures:
        print(line)
    if not failures:
        print(f"no {'significant ' if unproven else ''}regression beyond the thresholds")
    return 1 if failures else 0
