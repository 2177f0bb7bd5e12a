"""What the terminal shows: the header lines, and the summary of every case, cold start and counter.

Each case's row gives its latency percentiles and its throughput with the 95% interval's half
width; below the table, why a figure is n/a, how each case was measured (proofs, windows,
whether it stabilised, the plugin's own share) and, on hosts with several GPUs, each GPU.
Each load scenario gets one line with its headline figure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_cuzk.core import compat
from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import METRICS, STAGES, Figures
from pytest_cuzk.run.plan import PRECISION_BUDGETS
from pytest_cuzk.sinks.tables import table
from pytest_cuzk.sinks.view import config_info
from pytest_cuzk.verdicts.baseline import compared_with
from pytest_cuzk.verdicts.gates import compared
from pytest_cuzk.vocab.units import format_bytes, plural, rough_duration

if TYPE_CHECKING:
    from pytest_cuzk.backends.protocol import DaemonBackend
    from pytest_cuzk.measure.ledger import MetricValues
    from pytest_cuzk.scenarios.records import ScenarioFigures
    from pytest_cuzk.sinks.view import RunView

__all__ = ["compare_lines", "header_lines", "metric_deltas", "scenario_lines", "stage_line", "summary_lines"]

_MEDIAN = stats.Quantile(50)
_SUMMARY_METRICS = ("p50", "p90", "p99", "throughput", "rss_peak", "vram_peak")
_NA_LABELS = {
    "rss_peak_bytes": "RSS",
    "vram_peak_bytes": "VRAM",
    "status_memory_peak_bytes": "daemon /status",
}


def header_lines(session: RunView) -> list[str]:
    """The daemon mode and why, and the matrix; under xdist what that means for the figures."""
    from pytest_cuzk.core.errors import CuzkError

    s = session.settings
    try:
        choice = session.choice
        lines = [f"cuzk: daemon mode {choice.mode} ({choice.reason})"]
    except CuzkError as exc:
        return [f"cuzk: no daemon: {exc}"]
    if choice.control is not None:
        lines.append(
            f"cuzk: A/B: each case also runs on the control build {choice.control.profile().identity()} "
            f"({choice.control.mode}), windows of the two builds in pairs, in a seeded random order"
        )
    if session.config.args == ["pytest_cuzk.suite"]:
        lines.append(
            "cuzk: running the packaged suite (no test paths given: pass paths to run your own tests)"
        )
    extended = s.compare_fail or compat.saving_as(session.config) is not None  # as ``Plan.of`` sizes it
    gated = ""
    if extended:
        gated = f" ({PRECISION_BUDGETS * s.case_budget:g} s while short of the gate's precision)"
    lines.append(
        f"cuzk: batch sizes {','.join(map(str, s.batch_sizes))}, concurrency "
        f"{','.join(map(str, s.concurrency))}; per case at least {plural(s.proofs, 'proof')} and at most "
        f"{s.max_proofs}, until the last 3 windows of {s.window:g} s agree within {s.stability:g}% or "
        f"{s.case_budget:g} s are spent{gated}; sampling every {s.sample_interval}s"
    )
    if s.run_budget is not None:
        most = rough_duration(s.run_budget)[1:]
        lines.append(
            f"cuzk: the run measures for at most {most} once the daemon is ready (--cuzk-run-budget), "
            "divided among the selected cases: how long each takes is said after the warm-up"
        )
    config = session.config
    if config.pluginmanager.hasplugin("xdist") and getattr(config.option, "numprocesses", None):
        lines.append("cuzk: pytest-benchmark disables itself under xdist; pytest-cuzk's own figures are kept")
        if not choice.attached:
            lines.append(
                "cuzk: each xdist worker spawns its own daemon, and they share this host's RAM and GPUs: "
                "measure with -n 0"
            )
    return lines


def metric_deltas(totals: MetricValues) -> list[str]:
    """Counters that moved over the run, as ``name{labels}: +N``; failures the suite planned are said so."""
    from pytest_cuzk.measure.ledger import PLANNED, series_name

    planned = totals.get(PLANNED, 0.0)
    lines = []
    for key, delta in sorted(totals.items()):
        if not delta or key == PLANNED:
            continue
        why = ""
        if planned and key == ("cuzk_proofs_failed_total", ()):
            why = f" ({planned:g} on purpose: the malformed-input test's truncated requests)"
        lines.append(f"  {series_name(key)}: {delta:+g}{why}")
    return lines


def _cold_lines(colds: Iterable[dict[str, Any]]) -> list[str]:
    """Each daemon start with the time each readiness stage took; a restart's cost is its start's total."""
    from pytest_cuzk.backends.protocol import ColdStart

    lines: list[str] = []
    said: set[str] = set()
    for record in colds:
        cold = ColdStart.from_dict(record)
        where = cold.label + (f" batch {cold.batch_size}" if cold.batch_size else "")
        total = cold.start_s + sum(sum(d.values()) for d in (cold.srs_load_s, cold.warmup_s, cold.pce_s))
        stages = (("SRS load", cold.srs_load_s), ("warm-up", cold.warmup_s), ("PCE", cold.pce_s))
        said_stages = ", ".join(_stage(name, seconds) for name, seconds in stages)
        lines.append(
            f"cold start [{where}] {total:.1f} s: start {cold.start_s:.2f} s, {said_stages}"
            + (" (low-memory warm-up)" if cold.lowmem_warmup else "")
        )
        lines += [f"  note: {n}" for n in cold.notes]
        restarts = [r for r in record.get("restarts", []) if r not in said]
        said.update(restarts)
        lines += [f"  {r}" for r in restarts]
    return lines


def _stage(name: str, seconds: dict[str, float]) -> str:
    """``SRS load porep 1.84 s, winning 0.12 s``: a readiness stage's seconds per kind (``none``: skipped)."""
    return f"{name} " + (", ".join(f"{kind} {s:.2f} s" for kind, s in seconds.items()) or "none")


def _interval(f: Figures) -> str:
    ci = f.throughput_proofs_per_hour_ci
    if ci is None or not f.throughput_proofs_per_hour:
        return "n/a"
    return f"±{(ci[1] - ci[0]) / 2 / f.throughput_proofs_per_hour:.1%}"


def na_lines(rows: Iterable[Figures]) -> list[str]:
    """Why figures are n/a, each reason once, naming the tests unless it holds for all of them."""
    rows = list(rows)
    names = {m.attr: m.name for m in METRICS.values()} | _NA_LABELS
    seen: dict[tuple[str, str], list[str]] = {}
    for f in rows:
        for attr, why in f.na_reasons.items():
            if attr in names and f.why_na(attr):
                seen.setdefault((names[attr], why), []).append(f.test)
    return [
        f"{label} n/a: {why}" + ("" if len(tests) == len(rows) else f" [{', '.join(tests)}]")
        for (label, why), tests in seen.items()
    ]


def measurement_line(f: Figures) -> str:
    """How a case was measured: proofs, waves and windows, why it stopped, and the plugin's own share."""
    share = "n/a" if f.plugin_share_pct is None else f"{f.plugin_share_pct:.2f}%"
    cv = "" if f.throughput_cv is None else f", windows' CV {f.throughput_cv:.1%}"
    others = f.memory.host_other_cpu_pct if f.memory is not None else None
    busy = "" if others is None else f"; other processes kept {others:.0f}% of the host's CPUs busy"
    settled = f.stability or ("stable" if f.stabilised else "not stable")
    return (
        f"{f.test}: {plural(f.proofs_ok + f.proofs_failed, 'proof')} in {plural(f.waves, 'wave')}, "
        f"{plural(f.windows, 'window')}, "
        f"{settled} ({_ended(f)}){cv}; "
        f"{f.measured_s:.1f} s timed; plugin: client and transport {share} of the daemon's time, "
        f"{f.untimed_s:.2f} s of checks between waves{busy}"
    )


def median_interval(
    values: Sequence[float], fmt: Callable[[float], str], unit: str, median: float | None = None
) -> str:
    """``9.80 s (9.10 to 10.40 s)``: a median with its 95% interval, both in ``unit``.

    The summary's one way to show a median, whatever its unit and digits (``fmt``): ``median`` is
    the case's recorded figure where it has one, so the line reads as the table and the gate do.
    """
    ci = _MEDIAN.interval(values)
    middle = float(np.median(values)) if median is None else median
    within = f"{fmt(ci[0])} to {fmt(ci[1])}{unit}" if ci is not None else "no interval"
    return f"{fmt(middle)}{unit} ({within})"


def interval_line(f: Figures) -> str:
    """What each figure's 95% interval is over: windows, proofs, partitions; peaks have none."""
    s, p50, seconds = f.samples, METRICS["p50"], "{:.2f}".format
    parts = [f"throughput {_interval(f)} over {plural(len(s.series('window_s_per_proof')), 'window')}"]
    if s.latency_s:
        median = median_interval(s.latency_s, p50.fmt, p50.suffix, f.latency_p50_s)
        parts.append(f"median latency {median} over {plural(len(s.latency_s), 'proof')}")
    for name, partitions in (("GPU", s.partition_gpu_ms), ("synthesis", s.partition_synth_ms)):
        if partitions:
            median = median_interval([ms / 1000 for ms in partitions], seconds, " s")
            parts.append(f"{name} per partition {median} over {plural(len(partitions), 'partition')}")
    parts.append("RSS and VRAM peaks: one value per case, no interval")
    return "  95% intervals: " + "; ".join(parts)


def _ended(f: Figures) -> str:
    """Why the case's measurement ended: its plan, or the failure that stopped it part-way."""
    if f.failed:
        return f"failed part-way, after {plural(f.proofs_ok, 'proof')}: {f.failed}"
    return f.stop_reason or "ended"


def stage_line(f: Figures) -> str | None:
    """The daemon's stage times per proof (medians with their 95% intervals): where a proof's time went."""
    parts = []
    for name, series, _, label in STAGES:
        metric = METRICS[name]
        value = metric.value(f)
        if value is not None:
            median = median_interval(f.samples.series(series), metric.fmt, metric.suffix, value)
            parts.append(f"{label} {median}")
    return f"  per proof, median (95% CI): {', '.join(parts)}" if parts else None


def compare_lines(session: RunView) -> list[str]:
    """Every compared case's change in each gated figure, in words, whether it passed or not."""
    return [
        line
        for test, said in compared(session.config, session.rows).items()
        for line in (f"compared {test}:", *(f"  {sentence}" for sentence in said))
    ]


def gpu_lines(f: Figures) -> list[str]:
    """Each GPU on its own line: utilisation and clock say whether it proved, and clocks swing times."""
    gpus = f.memory.gpus if f.memory is not None else ()
    return [f"  GPU {g.index} {g.name}: {g.describe()}" for g in gpus]


def scenario_lines(scenarios: Sequence[ScenarioFigures]) -> list[str]:
    """Each load scenario's headline figure, on one line under its test."""
    if not scenarios:
        return []
    return ["load scenarios:", *(f"  {f.test}: {f.headline()}" for f in scenarios)]


def _daemon_lines(daemons: Iterable[DaemonBackend]) -> list[str]:
    """Each build once, with the daemons that run it: one build on several hosts is one line."""
    builds: dict[str, list[DaemonBackend]] = {}
    for b in daemons:
        builds.setdefault(b.profile().identity(), []).append(b)
    lines = []
    for build, runs in builds.items():
        how = "; ".join(dict.fromkeys(f"{b.mode}, {'on this host' if b.local else 'remote'}" for b in runs))
        labels = ", ".join(f"[{b.label}]" for b in runs)
        lines.append(f"daemon {labels}: {build} ({how})")
    return lines


def _measured_lines(session: RunView) -> list[str]:
    """What was measured, on what: each daemon's build and place, this host, and where the outputs went."""
    from pytest_cuzk.host.info import host_info

    lines = _daemon_lines(session.choice.every)
    h = host_info()
    gpus = ", ".join(f"{g.name} {format_bytes(g.vram_total_bytes)}" for g in h.gpus) or (
        f"none ({h.gpu_unavailable_reason})"
    )
    driver = f", driver {h.driver_version}, CUDA {h.cuda_driver_version}" if h.driver_version else ""
    cpu = f"{h.cpu_model}, {h.cpu_logical_cores} cores, {format_bytes(h.ram_total_bytes)} RAM"
    lines.append(f"host {h.hostname}: {cpu}; GPUs: {gpus}{driver}")
    s, root = session.settings, session.workspace.root
    if s.plots:
        lines.append(f"plots (memory, sweeps): {s.plots}")
    if session.workspace.keep and root is not None:
        lines.append(f"daemon configs and logs kept in {root} (a test failed)")
    return lines


def _listed(head: str, tests: list[tuple[str, str]]) -> list[str]:
    """``head`` with how many tests, then each test and why."""
    if not tests:
        return []
    each = (f"  {n.rpartition('::')[2]}: {why}" for n, why in tests)
    return [f"{head}: {plural(len(tests), 'cuzk test')}", *each]


def _control(f: Figures) -> tuple[Figures, ...]:
    """An A/B case's control build as a row of its own, under the candidate's."""
    return (dataclasses.replace(f.ab.control, test=f"  {f.test} [control]"),) if f.ab is not None else ()


def ab_lines(rows: Iterable[Figures]) -> list[str]:
    """Each A/B case's paired change, how its pairs ran, and each build's identity and memory peaks."""
    lines: list[str] = []
    for f in rows:
        if (ab := f.ab) is None:
            continue
        lines.append(
            f"A/B {f.test}: candidate against control, {ab.describe()}; {ab.how()}; {ab.wall_s:.0f} s"
        )
        sides = (("candidate", ab.candidate_build, f), ("control", ab.control_build, ab.control))
        for name, build, fig in sides:
            rss, vram = (METRICS[m].fmt(METRICS[m].value(fig)) for m in ("rss_peak", "vram_peak"))
            lines.append(
                f"  {name} {build}: {fig.throughput_proofs_per_hour:.1f}/h, RSS peak {rss}, VRAM peak {vram}"
            )
    return lines


def summary_lines(session: RunView) -> list[str]:
    """The lines of the ``cuzk proving summary`` section, from every worker's figures."""
    metrics = [METRICS[m] for m in _SUMMARY_METRICS]
    heads = ["test", "kind", ">batch", ">j", ">ok", ">failed", *(f">{m.label}" for m in metrics)]
    heads.insert(heads.index(">proofs/h") + 1, ">±95%")
    rows = []
    for f in (row for case in session.rows for row in (case, *_control(case))):
        test = f"{f.test} FAILED" if f.failed else f.test  # a case that failed part-way: what it measured
        row: list[object] = [test, f.kind, f.batch_size, f.concurrency, f.proofs_ok, f.proofs_failed]
        row += [m.fmt(m.value(f)) for m in metrics]
        row.insert(heads.index(">±95%"), _interval(f))
        rows.append(row)
    # First what did not run or failed as a known bug: a reader must not take a short table for a full one
    lines = _listed("DID NOT RUN", session.not_run) + _listed("KNOWN ENGINE BUG (xfail)", session.known)
    lines += _measured_lines(session)
    baseline = compared_with(session.config)
    lines += baseline.lines(config_info(session)) if baseline is not None else []
    if rows or not session.scenarios:
        lines += table(heads, rows, rule=False).splitlines() if rows else ["no suite case ran"]
    lines += na_lines(session.rows)
    lines += ab_lines(session.rows)
    lines += compare_lines(session)
    for f in session.rows:
        lines.append(measurement_line(f))
        if stages := stage_line(f):
            lines.append(stages)
        lines.append(interval_line(f))
        if f.status_memory_peak_bytes is not None:
            peak = format_bytes(f.status_memory_peak_bytes)
            lines.append(f"  the daemon's /status: memory budget used at peak {peak}")
        lines += gpu_lines(f)
    lines += scenario_lines(session.scenarios)
    lines += _cold_lines(session.colds.values())
    lines += [f"data: {n}" for data in session.data_sets() for n in data.notes]
    lines += [f"note: {n}" for n in [*session.notes, *session.ledger.restarts_seen]]
    for label, totals in session.ledger.totals().items():
        deltas = metric_deltas(totals)
        if deltas:
            lines.append(f"daemon metrics over the run [{label}]:")
            lines += deltas
    return lines
