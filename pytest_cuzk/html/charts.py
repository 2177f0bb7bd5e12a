"""The pages' charts: matplotlib figures written as SVG text to inline in the page.

Each chart is one small function from plain figures to ``Markup``, so a new kind of curve (a
rate sweep, a concurrency curve) is one more function. Text stays text (``svg.fonttype``
``none``): smaller files, and the page's reader can select it. Every chart gets its own id
salt, so the ids of several SVGs in one page never collide.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import matplotlib
from markupsafe import Markup
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from pytest_cuzk.backends.protocol import ColdStart
from pytest_cuzk.measure.figures import METRICS, Samples
from pytest_cuzk.measure.memory import MemoryReport
from pytest_cuzk.scenarios.records import PriorityFigures, ScenarioFigures, ServerFigures, SweepFigures
from pytest_cuzk.sinks.plots import memory_figure

__all__ = [
    "cold_timeline",
    "history_chart",
    "latency_chart",
    "memory_chart",
    "ranking_chart",
    "scenario_chart",
    "svg",
    "windows_chart",
]

BLUE, GREEN, RED, AMBER, GREY = "#2563eb", "#16a34a", "#dc2626", "#d97706", "#6b7280"
CHART_WIDTH_IN = 6.4  # a case's charts sit two abreast
_HISTOGRAM_FROM = 8  # fewer proofs than this have no shape worth a histogram
_STAGES = {"start": GREY, "SRS load": BLUE, "warm-up": GREEN, "PCE": AMBER}


def svg(fig: Figure, chart_id: str) -> Markup:
    """The figure as an ``<svg>`` element (no XML prolog), its ids salted with ``chart_id``."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": chart_id}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return Markup(text[text.index("<svg") :])


def memory_chart(report: MemoryReport, chart_id: str) -> Markup:
    """RSS and VRAM over time with the proof waves marked: the PNG plot's figure, as SVG."""
    fig = memory_figure(report, "")
    fig.set_size_inches(CHART_WIDTH_IN, fig.get_figheight() * 0.75)  # half the page wide: larger text
    return svg(fig, chart_id)


def latency_chart(
    proofs: Sequence[tuple[float, bool]], p50: float | None, p90: float | None, chart_id: str
) -> Markup:
    """Each proof's latency (one dot per proof, in submission order) with p50 and p90 drawn.

    With enough proofs for a shape, a histogram above shares the latency axis.
    """
    ok = [(s, i) for i, (s, good) in enumerate(proofs, 1) if good]
    bad = [(s, i) for i, (s, good) in enumerate(proofs, 1) if not good]
    with_hist = len(ok) >= _HISTOGRAM_FROM
    height = 1.3 + min(2.2, 0.4 + 0.12 * len(proofs)) + (1.4 if with_hist else 0)
    fig = Figure(figsize=(CHART_WIDTH_IN, height), layout="constrained")
    axes = fig.subplots(2 if with_hist else 1, 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": (1, 1.4) if with_hist else (1,)})[:, 0]  # fmt: skip
    dots = axes[-1]
    if with_hist:
        axes[0].hist([s for s, _ in ok], bins="auto", color=BLUE, alpha=0.8)
        axes[0].set_ylabel("proofs")
    if ok:
        dots.plot(*zip(*ok, strict=True), "o", color=BLUE, markersize=5, label="proof")
    if bad:
        dots.plot(*zip(*bad, strict=True), "x", color=RED, markersize=7, label="failed proof")
    for value, name, style in ((p50, "p50", "--"), (p90, "p90", ":")):
        if value is not None:
            for ax in axes:
                ax.axvline(
                    value,
                    color=GREY,
                    linestyle=style,
                    linewidth=1.2,
                    label=f"{name} {METRICS[name].show(value)}",
                )
    dots.margins(x=0.08)
    dots.xaxis.set_major_locator(MaxNLocator(nbins=6))
    dots.set_ylim(len(proofs) + 0.7, 0.3)
    dots.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
    dots.set(xlabel="latency, submission to result (s)", ylabel="proof #")
    dots.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    for ax in axes:
        ax.grid(alpha=0.3)
    return svg(fig, chart_id)


def windows_chart(samples: Samples, complete: int, chart_id: str) -> Markup | None:
    """Each wave's rate as a dot and each measurement window's throughput as a bar: how the case settled.

    Windows numbered ``complete`` and above are the unfinished one the case stopped in.
    """
    windows = {w: s for w, s in samples.windows().items() if s > 0}
    if not windows:
        return None
    waves = [(w, s, n) for w, s, n in zip(samples.wave_window, samples.wave_s, samples.wave_size, strict=True)
             if s > 0]  # fmt: skip
    fig = Figure(figsize=(CHART_WIDTH_IN, 2.6), layout="constrained")
    ax = fig.subplots()
    ax.plot([w + 0.5 for w, _, _ in waves], [3600 * n / s for _, s, n in waves], ".", color=GREY, alpha=0.5,
            markersize=4, label="one wave")  # fmt: skip
    for window, seconds_per_proof in windows.items():
        rate = 3600 / seconds_per_proof
        done = window < complete
        label = ("complete window" if window == 0 else None) if done else "open window"
        ax.bar(window + 0.5, rate, width=0.8, color=BLUE if done else "none", edgecolor=BLUE,
               alpha=0.35 if done else 1.0, label=label)  # fmt: skip
    ax.set(xlabel="measurement window", ylabel="proofs/h")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    return svg(fig, chart_id)


def scenario_chart(record: ScenarioFigures, chart_id: str) -> Markup | None:
    """A load scenario's curve: the rates tried, the concurrency sweep, or PoSt latency under load."""
    fig = Figure(figsize=(CHART_WIDTH_IN, 2.8), layout="constrained")
    ax = fig.subplots()
    if isinstance(record, ServerFigures) and record.rates:
        for step in record.rates:
            tail = step.latency_p99_s if step.latency_p99_s is not None else step.latency_max_s
            if tail is not None:
                mark, colour = ("o", GREEN) if step.held else ("x", RED)
                ax.plot(step.rate_per_hour, tail, mark, color=colour, markersize=7)
        ax.axhline(record.slo_s, color=GREY, linestyle="--", label=f"bound {record.slo_s:.3g} s")
        if record.max_sustainable_rate_per_hour is not None:
            ax.axvline(
                record.max_sustainable_rate_per_hour, color=BLUE, linestyle=":", label="max sustainable"
            )
        ax.plot([], [], "o", color=GREEN, label="held")
        ax.plot([], [], "x", color=RED, label="missed")
        ax.set(xlabel="arrival rate (proofs/h)", ylabel="tail latency (s)")
    elif isinstance(record, SweepFigures) and record.curve:
        xs = [p.in_flight for p in record.curve]
        ys = [p.throughput_proofs_per_hour for p in record.curve]
        ax.plot(xs, ys, "o-", color=BLUE, label="throughput")
        for p in record.curve:
            if p.throughput_proofs_per_hour_ci is not None:
                ax.vlines(p.in_flight, *p.throughput_proofs_per_hour_ci, color=BLUE, alpha=0.5)
        if record.knee_in_flight is not None:
            ax.axvline(
                record.knee_in_flight, color=AMBER, linestyle="--", label=f"knee {record.knee_in_flight}"
            )
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(xlabel="proofs in flight", ylabel="proofs/h")
    elif isinstance(record, PriorityFigures) and record.latencies_s:
        ax.plot(range(1, len(record.latencies_s) + 1), record.latencies_s, "o", color=BLUE, markersize=4,
                label=f"{record.kind} under {record.background_kind} load")  # fmt: skip
        if record.idle_latency_p50_s is not None:
            ax.axhline(record.idle_latency_p50_s, color=GREEN, linestyle=":", label="idle p50")
        ax.axhline(record.slo_s, color=RED, linestyle="--", label=f"bound {record.slo_s:.3g} s")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # proofs are counted, not measured
        ax.set(xlabel="PoSt proof #", ylabel="latency (s)")
    else:
        return None
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    return svg(fig, chart_id)


def _stages(cold: ColdStart) -> list[tuple[str, str, float]]:
    """(stage, kind, seconds) in the order the readiness chain runs them."""
    out = [("start", "", cold.start_s)]
    for kind, srs in cold.srs_load_s.items():
        out.append(("SRS load", kind, srs))
        out += [(name, kind, of[kind]) for name, of in (("warm-up", cold.warmup_s), ("PCE", cold.pce_s))
                if kind in of]  # fmt: skip
    return out


def cold_timeline(colds: Sequence[ColdStart], chart_id: str) -> Markup:
    """Each daemon configuration's readiness stages laid end to end on one time axis."""
    fig = Figure(figsize=(10, 0.9 + 0.45 * len(colds)), layout="constrained")
    ax = fig.subplots()
    total = max((sum(s for _, _, s in _stages(c)) for c in colds), default=0.0) or 1.0
    for row, cold in enumerate(colds):
        left = 0.0
        for stage, kind, seconds in _stages(cold):
            ax.barh(row, seconds, left=left, color=_STAGES[stage], edgecolor="white", height=0.6)
            if seconds > total * 0.06 and kind:
                ax.text(left + seconds / 2, row, kind, ha="center", va="center", fontsize=7, color="white")
            left += seconds
    names = [f"{c.label}" + (f" batch {c.batch_size}" if c.batch_size else "") for c in colds]
    ax.set_yticks(range(len(colds)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (stages end to end)")
    handles = [Patch(color=c, label=s) for s, c in _STAGES.items()]
    fig.legend(handles=handles, loc="outside upper right", fontsize=7, ncols=4, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return svg(fig, chart_id)


def ranking_chart(best: Sequence[tuple[str, float]], chart_id: str) -> Markup:
    """Best proofs/hour per host (its best pool's figure), fastest on top."""
    fig = Figure(figsize=(10, 0.8 + 0.4 * len(best)), layout="constrained")
    ax = fig.subplots()
    names, values = [n for n, _ in best], [v for _, v in best]
    bars = ax.barh(range(len(best)), values, color=BLUE, height=0.6)
    ax.bar_label(bars, [METRICS["throughput"].show(v) for v in values], padding=3, fontsize=8)
    ax.set_yticks(range(len(best)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(values, default=1.0) * 1.18 or 1.0)
    ax.set_xlabel("best proofs per hour")
    ax.grid(axis="x", alpha=0.3)
    return svg(fig, chart_id)


def history_chart(builds: Sequence[str], lines: Mapping[str, Mapping[str, float]], chart_id: str) -> Markup:
    """Proofs/hour of each line (a host and configuration) across builds, oldest build first."""
    fig = Figure(figsize=(10, 2.9), layout="constrained")
    ax = fig.subplots()
    for name, by_build in sorted(lines.items()):
        xs = [i for i, b in enumerate(builds) if b in by_build]
        ax.plot(xs, [by_build[builds[i]] for i in xs], marker="o", label=name)
    ax.set_xticks(range(len(builds)), [b if len(b) <= 24 else b[:23] + "…" for b in builds],
                  rotation=15, ha="right", fontsize=7)  # fmt: skip
    ax.margins(x=0.05, y=0.15)
    ax.set_ylabel("proofs per hour (median)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    ax.grid(alpha=0.3)
    return svg(fig, chart_id)
