"""``cuzk-perf compare``: one build against another on the same host, with ``--fail`` limits."""

from __future__ import annotations

import argparse
import sys

from ..figures import METRICS, regression
from ..records import ResultRow
from ..results import ResultsDB
from ..tables import table
from .queries import group, labels, values

__all__ = ["cmd_compare", "compare_rows", "resolve_build"]


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

    ``limits`` are percentages by metric name, as ``--cuzk-compare-fail`` takes them.

    Only the same host is compared: another host's figures would measure the hardware, not the build.
    """
    ga, gb = (
        group(x, lambda r: (r.test.kind, r.test.batch_size, r.test.concurrency, r.run.host.fingerprint))
        for x in (a, b)
    )
    out: list[list[str]] = []
    failures: list[str] = []
    for key in sorted(ga.keys() & gb.keys()):
        kind, batch, j, _ = key
        host = labels(ga[key] + gb[key])
        for name, m in METRICS.items():
            va, vb = values(ga[key], name), values(gb[key], name)
            if not va or not vb:
                continue
            x, y = m.combine(va), m.combine(vb)
            change = f"{(y - x) / x:+.1%}" if x else "n/a"
            worse, limit = regression(m, x, y), limits.get(name)
            bad = limit is not None and worse is not None and worse > limit
            shown = "-" if limit is None else f"{'-' if m.higher_is_better else '+'}{limit:g}%"
            verdict = "REGRESSION" if bad else "ok"
            a_, b_ = m.show(x), m.show(y)
            out.append([kind, str(batch), str(j), host, name, a_, b_, change, shown, verdict])
            if bad:
                failures.append(
                    f"REGRESSION {kind} batch{batch}-j{j} on {host} {name}: A {a_} -> B {b_} "
                    f"({change}, limit {shown})"
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
