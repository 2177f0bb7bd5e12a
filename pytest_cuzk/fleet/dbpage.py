"""What the results-database page shows, gathered into the template's context.

Hosts ranked by their best proofs/hour per kind with their hardware, each host's history
across builds per kind (the pools and figures of ``cuzk-perf hosts`` and ``history``), and on
each host the latest build against the one before it, through ``cuzk-perf``'s own queries and
``compare_rows``. Only what ``ResultRow`` holds is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_cuzk.fleet.compare import compare_rows
from pytest_cuzk.fleet.hosts import HISTORY, history, ranking
from pytest_cuzk.fleet.queries import config, figure, gpus, group, labels, machine, shown, spread
from pytest_cuzk.html.charts import history_chart, ranking_chart
from pytest_cuzk.measure.figures import METRICS
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import ResultRow
from pytest_cuzk.vocab.units import format_bytes

__all__ = ["db_page"]


def _ranking(kind: str, rows: list[ResultRow]) -> dict[str, Any]:
    """The hosts of one kind, fastest first, with the hardware that did it (as ``cuzk-perf hosts``)."""
    hosts: list[tuple[float, dict[str, Any]]] = []
    for _, rs, pool in ranking(rows):  # one rented machine, as cuzk-perf hosts counts them
        top = pool[0]
        h = top.run.host
        row = {
            "name": labels(rs),
            "fingerprint": h.fingerprint,
            "gpus": gpus(top),
            "cpu": f"{h.cpu_model}, {h.cpu_cores} cores",
            "ram": format_bytes(h.ram_bytes),
            "vram": format_bytes(h.vram_total_bytes),
            "driver": " / CUDA ".join(x for x in (h.driver, h.cuda) if x) or "-",
            "best": shown(pool, "throughput"),
            "spread": spread(pool),
            "runs": len({r.run.run_id for r in pool}),
            "config": config(top),
            "build": top.run.daemon_build,
        }
        hosts.append((figure(pool, "throughput") or 0.0, row))
    hosts.sort(key=lambda h: -h[0])
    chart = ranking_chart([(h["name"], per_hour) for per_hour, h in hosts], f"rank-{kind}")
    return {"kind": kind, "hosts": [h for _, h in hosts], "chart": chart}


def _history(kind: str, rows: list[ResultRow], builds: Sequence[str]) -> dict[str, Any]:
    """Each build's figures per host and configuration, builds in the order they were first run.

    A configuration (batch size, concurrency) is a line of its own: a host's best over all of
    them would hide a regression in one.
    """
    names = {key: labels(rs) for key, rs in group(rows, machine).items()}
    lines: dict[str, dict[str, float]] = {}
    table = []
    for (build, host, cfg), rs in history(rows).items():
        lines.setdefault(f"{names[host]} {cfg}", {})[build] = figure(rs, "throughput") or 0.0
        table.append(
            {
                "host": names[host],
                "config": cfg,
                "build": build,
                "when": min(r.run.started_at for r in rs),
                "runs": len({r.run.run_id for r in rs}),
                "spread": spread(rs),
                "figures": [shown(rs, m) for m in HISTORY],
            }
        )
    table.sort(key=lambda t: (t["host"], t["config"], builds.index(t["build"])))
    shown_builds = [b for b in builds if any(t["build"] == b for t in table)]
    one = len(shown_builds) < 2  # one build: no line to draw
    chart = None if one else history_chart(shown_builds, lines, f"hist-{kind}")
    return {"kind": kind, "rows": table, "chart": chart, "heads": [METRICS[m].label for m in HISTORY]}


def _latest(rows: list[ResultRow], builds: Sequence[str], limits: dict[str, float]) -> list[dict[str, Any]]:
    """On each host that ran two builds or more, its latest build against the one before, per case."""
    out = []
    for _, rs in sorted(group(rows, machine).items()):
        ran = sorted({r.run.daemon_build for r in rs}, key=builds.index)
        if len(ran) < 2:
            continue
        a, b = ran[-2:]
        table, failures, unproven = compare_rows(
            [r for r in rs if r.run.daemon_build == a], [r for r in rs if r.run.daemon_build == b], limits
        )
        cases: dict[str, dict[str, dict[str, str]]] = {}
        for line in table:
            kind, batch, j, _host, name, va, vb, change, evidence, limit, verdict = line
            cases.setdefault(f"{kind} batch{batch}-j{j}", {})[name] = {
                "a": va,
                "b": vb,
                "change": change,
                "evidence": evidence,
                "limit": limit,
                "verdict": verdict,
                "tone": _tone(name, change, verdict),
            }
        out.append(
            {"host": labels(rs), "a": a, "b": b, "cases": cases, "failures": failures, "unproven": unproven}
        )
    return out


def _tone(metric: str, change: str, verdict: str) -> str:
    """``bad`` for a significant regression beyond its limit, else ``better`` or ``worse`` ('' unchanged)."""
    if verdict == "regressed":
        return "bad"
    if change in ("n/a", "+0.0%", "-0.0%"):
        return ""
    up = change.startswith("+")
    return "better" if up == METRICS[metric].higher_is_better else "worse"


def db_page(db: ResultsDB, kind: str | None, limits: dict[str, float]) -> dict[str, Any]:
    """The results-database page's template context (``kind`` narrows it to one kind)."""
    rows = db.rows(kind=kind)
    builds = [b for b, _, _ in db.builds()]
    by_kind = sorted(group(rows, lambda r: r.test.kind).items())
    started = [r.run.started_at for r in rows]
    return {
        "source": db.url.render_as_string(hide_password=True),
        "kind": kind,
        "limits": limits,
        "totals": {
            "hosts": len({machine(r) for r in rows}),
            "runs": len({r.run.run_id for r in rows}),
            "tests": len(rows),
            "builds": len({r.run.daemon_build for r in rows}),
        },
        "span": (min(started), max(started)) if started else None,
        "rankings": [_ranking(k, rs) for k, rs in by_kind],
        "histories": [_history(k, rs, builds) for k, rs in by_kind],
        "latest": _latest(rows, builds, limits),
        "metrics": list(METRICS.values()),
    }
