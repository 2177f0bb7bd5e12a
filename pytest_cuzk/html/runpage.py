"""What the run report shows, gathered into the template's context.

The run's identity (daemons and their builds, host, GPUs, driver, the matrix and gates asked
for), a row per test, what did not run and why, each case's charts and every figure of its
``Figures`` record, the cold starts and the daemons' counter deltas. A section whose data the
run does not have is left out.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_cuzk.backends.protocol import ColdStart
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.host.info import host_info
from pytest_cuzk.html.charts import cold_timeline, latency_chart, memory_chart, scenario_chart, windows_chart
from pytest_cuzk.html.outcomes import Outcomes, TestEntry
from pytest_cuzk.html.render import show
from pytest_cuzk.measure.figures import METRICS, Figures
from pytest_cuzk.measure.ledger import series_name
from pytest_cuzk.sinks.view import config_info
from pytest_cuzk.verdicts.baseline import compared_with
from pytest_cuzk.verdicts.gates import compared
from pytest_cuzk.vocab.redact import redact
from pytest_cuzk.vocab.units import format_bytes

if TYPE_CHECKING:
    from pytest_cuzk.config.settings import Settings
    from pytest_cuzk.sinks.view import RunView

__all__ = ["case_view", "details", "gates", "run_page"]

_HEADLINE = ("throughput", "p50", "p90", "rss_peak", "vram_peak")
_IDENTITY = ("test", "label", "kind", "failures")  # shown in the case's heading and its own list
_GROUPS = {
    "": "Figures",
    "timings": "The daemon's phase times (mean over successful proofs; GPU, synthesis: sums over partitions)",
    "memory": "Memory and GPU sampler",
    "ab": "A/B: the paired change against the control build (log-ratios: candidate over control)",
}


def _scalar(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_scalar(v) and not isinstance(v, (list, tuple)) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def details(figures: Figures) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every plain field of the record, grouped by the record it sits in, shown by its unit.

    Fields added to ``Figures`` later appear here without a change; curves (lists of
    pairs) are left to charts of their own. A compared figure (``METRICS``) is shown as its metric
    shows it, so it reads as it does in the results table above and in the terminal.
    """
    groups: dict[str, list[tuple[str, str]]] = {"": []}
    metrics = {m.attr: m for m in METRICS.values()}
    for key, value in figures.to_dict().items():
        if isinstance(value, dict):
            rows = [(k, show(k, v)) for k, v in value.items() if _scalar(v)]
            groups[key] = rows
        elif key in metrics:  # as the results table and the terminal print it
            groups[""].append((key, metrics[key].show(value)))
        elif key not in _IDENTITY and _scalar(value):
            groups[""].append((key, show(key, value)))
    return [(_GROUPS.get(k, k), rows) for k, rows in groups.items() if rows]


def case_view(index: int, entry: TestEntry) -> dict[str, Any]:
    """One case's section: its headline figures, charts and details (what the case has of them)."""
    figures, chart = entry.figures, f"case{index}"
    view: dict[str, Any] = {"entry": entry, "anchor": f"case-{index}", "figures": figures, "headline": [],
                            "memory_chart": None, "latency_chart": None, "windows_chart": None,
                            "scenario_chart": None, "scenario_headline": "", "details": []}  # fmt: skip
    if entry.scenario is not None:
        view["scenario_chart"] = scenario_chart(entry.scenario, f"{chart}s")
        view["scenario_headline"] = entry.scenario.headline()
    if entry.proofs:
        p50, p90 = (figures.latency_p50_s, figures.latency_p90_s) if figures else (None, None)
        view["latency_chart"] = latency_chart(entry.proofs, p50, p90, f"{chart}l")
    if figures is None:
        return view
    view["headline"] = [(METRICS[m].label, METRICS[m].show(METRICS[m].value(figures))) for m in _HEADLINE]
    view["details"] = details(figures)
    view["windows_chart"] = windows_chart(figures.samples, figures.windows, f"{chart}w")
    if figures.memory is not None and figures.memory.series.t_s:
        view["memory_chart"] = memory_chart(figures.memory, f"{chart}m")
    return view


def _grouped(limits: Mapping[str, float], fmt: Callable[[float], str]) -> str:
    """``200 GiB (porep, snap)``, one part per distinct limit."""
    by_value: dict[float, list[str]] = {}
    for kind, value in limits.items():
        by_value.setdefault(value, []).append(kind)
    return "; ".join(f"{fmt(v)} ({', '.join(kinds)})" for v, kinds in by_value.items())


def gates(s: Settings) -> list[str]:
    """The gates the run applied, in words."""
    out = [
        f"{what}: {_grouped(limits, fmt)}"
        for what, limits, fmt in (
            ("minimum throughput", s.min_throughput, lambda v: f"{v:,.10g} proofs/h"),
            ("maximum RSS peak", s.max_rss, format_bytes),
            ("maximum VRAM peak", s.max_vram, format_bytes),
        )
        if limits
    ]
    against = "the baseline" if s.ab is None else "the control build"
    out += [f"{name} no worse than {pct:g}% against {against}" for name, pct in s.compare_fail.items()]
    return out


def _daemons(session: RunView) -> tuple[str, list[dict[str, Any]]]:
    try:
        choice = session.choice
    except CuzkError as exc:
        return f"no daemon: {exc}", []
    daemons = [
        {
            "label": b.label,
            "mode": b.mode,
            "build": b.profile().identity(),
            "preset": b.profile().preset(),
            "address": b.address,
            "local": b.local,
        }
        for b in choice.every
    ]
    return f"{choice.mode} ({choice.reason})", daemons


def _verdict(counts: Mapping[str, int], exitstatus: int) -> tuple[str, str]:
    if counts.get("failed") or counts.get("error"):
        return "bad", "Failed"
    if exitstatus == 2:
        return "warn", "Interrupted"
    if not counts:
        return "warn", "No test ran"
    return "good", "Passed"


def _colds(session: RunView) -> list[dict[str, Any]]:
    return [
        {"cold": ColdStart.from_dict(c), "restarts": c.get("restarts", [])} for c in session.colds.values()
    ]


def _deltas(session: RunView) -> list[tuple[str, str, float]]:
    return [
        (label, series_name(key), delta)
        for label, totals in sorted(session.ledger.totals().items())
        for key, delta in sorted(totals.items())
        if delta
    ]


def run_page(
    outcomes: Outcomes, session: RunView, started: dt.datetime, duration_s: float, exitstatus: int
) -> dict[str, Any]:
    """The run report's template context."""
    s, config = session.settings, session.config
    entries: Sequence[TestEntry] = outcomes.entries()
    shown = (e for e in entries if e.figures is not None or e.proofs or e.scenario is not None)
    cases = [case_view(i, e) for i, e in enumerate(shown)]
    colds = _colds(session)
    mode, daemons = _daemons(session)
    counts = outcomes.counts()
    notes = [f"{nodeid.rpartition('::')[2] or nodeid}: {message}" for nodeid, message in outcomes.warnings]
    notes += [n for data in session.data_sets() for n in data.notes] + list(session.notes)
    return {
        "verdict": _verdict(counts, exitstatus),
        "counts": counts,
        "started": started,
        "duration_s": duration_s,
        "command": redact(shlex.join(["pytest", *config.invocation_params.args])),
        "workers": getattr(config.option, "numprocesses", None) or 0,
        "mode": mode,
        "daemons": daemons,
        "host": host_info(),
        "settings": s,
        "gates": gates(s),
        "baseline": base.lines(config_info(session)) if (base := compared_with(config)) is not None else [],
        "compared": compared(config, session.rows),
        "metrics": list(METRICS.values()),
        # a scenario has a case too, and a table of its own
        "cases_run": [e for e in entries if (e.case or e.figures) is not None and e.scenario is None],
        "others": [e for e in entries if e.case is None and e.figures is None and e.scenario is None],
        "scenarios": [e for e in entries if e.scenario is not None],
        "anchors": {c["entry"].nodeid: c["anchor"] for c in cases},
        "not_run": [e for e in entries if not e.ran],
        "collect_errors": outcomes.collect_errors,
        "cases": cases,
        "colds": colds,
        "cold_chart": cold_timeline([c["cold"] for c in colds], "cold") if colds else None,
        "deltas": _deltas(session),
        "notes": notes,
    }
