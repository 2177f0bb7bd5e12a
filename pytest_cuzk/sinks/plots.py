"""One PNG per test: the daemon's RSS and VRAM over time with proof boundaries marked; a sweep's curve.

A peak figure alone does not say whether memory grew per proof (a leak) or spiked once (SRS load);
the shape over time with the proofs marked does. A concurrency sweep is drawn as throughput (with
its 95% intervals) and median latency against the proofs in flight, its knee marked. Uses
matplotlib's object API on the Agg canvas (no pyplot global state, no display), so it is safe from
any thread and on headless CI runners.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.figure import Figure, SubFigure
from matplotlib.text import Text

from pytest_cuzk.measure.memory import MemoryReport
from pytest_cuzk.scenarios.records import ScenarioFigures, SweepFigures
from pytest_cuzk.vocab.units import MIB

if TYPE_CHECKING:
    from pytest_cuzk.measure.figures import Figures
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult

__all__ = ["Plotter", "memory_figure", "plot_memory", "plot_sweep", "sweep_figure"]


def memory_figure(report: MemoryReport, title: str) -> Figure:
    """The report's RSS and VRAM series in two panels, proof boundaries marked (PNG here, SVG in HTML)."""
    vram = report.series.vram_bytes is not None  # else the lower panel only says why
    fig = Figure(figsize=(10, 6 if vram else 4.2), layout="constrained")
    rss_ax, vram_ax = fig.subplots(2, 1, sharex=True, height_ratios=(1, 1) if vram else (4, 1))
    if title:
        fig.suptitle(title, fontsize=10)
    _rss_panel(rss_ax, report)
    _vram_panel(vram_ax, report)
    vram_ax.set_xlabel("seconds since sampling started")
    for ax in (rss_ax, vram_ax):
        _draw_marks(ax, report, labels=ax is rss_ax)
    return fig


def plot_memory(report: MemoryReport, path: Path, title: str) -> Path:
    """Write the report's RSS and VRAM series as a PNG at `path` (parents created); returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    memory_figure(report, title).savefig(path, format="png", dpi=100)
    return path


def sweep_figure(record: SweepFigures) -> Figure:
    """Throughput and p50 latency against the proofs in flight, the knee marked."""
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.subplots()
    x = [p.in_flight for p in record.curve]
    y = [p.throughput_proofs_per_hour for p in record.curve]
    cis = [p.throughput_proofs_per_hour_ci or (v, v) for p, v in zip(record.curve, y, strict=True)]
    below, above = (
        [v - lo for v, (lo, _) in zip(y, cis, strict=True)],
        [hi - v for v, (_, hi) in zip(y, cis, strict=True)],
    )
    ax.errorbar(
        x, y, yerr=[below, above], marker="o", capsize=3, color="tab:blue", label="throughput, 95% interval"
    )
    ax.set_xlabel("proofs in flight (batch size x concurrency)")
    ax.set_ylabel("proofs per hour")
    ax.set_xticks(x)
    ax.set_ylim(0, max(max(y, default=0.0) * 1.15, 1.0))
    ax.grid(alpha=0.3)
    if record.knee_in_flight is not None:
        ax.axvline(
            record.knee_in_flight,
            color="tab:red",
            linestyle=":",
            label=f"knee: {record.knee_in_flight} in flight",
        )
    latency = ax.twinx()
    p50 = [p.latency_p50_s for p in record.curve]
    latency.plot(
        x,
        [v if v is not None else float("nan") for v in p50],
        marker="s",
        linestyle="--",
        color="tab:orange",
        label="p50 latency",
    )
    latency.set_ylabel("p50 latency (s)")
    latency.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0] + latency.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    fig.suptitle(f"{record.test}: {record.kind} batch {record.batch_size}", fontsize=10)
    return fig


def plot_sweep(record: SweepFigures, path: Path) -> Path:
    """Write the sweep's curve as a PNG at ``path`` (parents created); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_figure(record).savefig(path, format="png", dpi=100)
    return path


def _rss_panel(ax: Axes, report: MemoryReport) -> None:
    s = report.series
    ax.plot(s.t_s, [b / MIB for b in s.rss_bytes], label="daemon tree RSS", color="tab:blue")
    _annotate_peak(ax, s.t_s, s.rss_bytes)
    if report.rss_hwm_peak_bytes is not None:
        ax.axhline(
            report.rss_hwm_peak_bytes / MIB,
            color="tab:blue",
            linestyle=":",
            label=f"VmHWM peak {report.rss_hwm_peak_bytes / MIB:.0f} MiB ({report.rss_hwm_scope})",
        )
    ax.set_ylabel("RSS (MiB)")
    _headroom(ax)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)


def _vram_panel(ax: Axes, report: MemoryReport) -> None:
    s = report.series
    ax.set_ylabel("GPU memory (MiB)" if s.vram_bytes is not None else "GPU")
    ax.grid(alpha=0.3)
    if s.vram_bytes is None:
        why = report.vram_unavailable_reason or "VRAM unavailable"
        ax.text(0.5, 0.5, why, ha="center", transform=ax.transAxes)
        ax.set_yticks([])
        return
    source = "daemon pids" if report.vram_source == "pids" else "whole device (pids not visible)"
    ax.plot(s.t_s, [b / MIB for b in s.vram_bytes], label=f"VRAM, {source}", color="tab:green")
    _annotate_peak(ax, s.t_s, s.vram_bytes)
    if report.vram_source == "pids" and s.device_used_bytes is not None:
        used = [b / MIB for b in s.device_used_bytes]
        ax.plot(s.t_s, used, label="device used, all processes", color="tab:gray", linewidth=0.8)
    _headroom(ax)
    ax.legend(loc="lower right", fontsize=8)


def _headroom(ax: Axes) -> None:
    """Start at zero and leave room above the highest line, so a flat line is not hidden by the frame."""
    top = max((float(max(line.get_ydata(), default=0)) for line in ax.get_lines()), default=0.0)  # type: ignore[arg-type,type-var]
    ax.set_ylim(0, max(float(top) * 1.15, 1.0))


def _annotate_peak(ax: Axes, t_s: list[float], values: list[int]) -> None:
    if not values:
        return
    i = max(range(len(values)), key=values.__getitem__)
    late = t_s[i] > (t_s[0] + t_s[-1]) / 2  # label on the side with room, inside the axes
    ax.annotate(
        f"peak {values[i] / MIB:.0f} MiB",
        xy=(t_s[i], values[i] / MIB),
        xytext=(-5 if late else 5, -12),
        textcoords="offset points",
        ha="right" if late else "left",
        fontsize=8,
    )
    ax.plot([t_s[i]], [values[i] / MIB], marker="o", color="tab:red", markersize=4)


class _MarkLabels(Artist):
    """The marks' labels that fit side by side: one that would touch the last one drawn is left out.

    Which fit depends on the size the figure is drawn at (the page's chart is narrower than the
    PNG) and on where the layout puts the axes, so it is decided as the figure draws. A mark
    whose label is left out keeps its line.
    """

    GAP = 0.5  # between two labels, of a label's thickness

    def __init__(self, ax: Axes, marks: list[tuple[float, str]]) -> None:
        super().__init__()
        self.set_in_layout(False)  # inside the axes, from their top edge down
        at_top = ax.get_xaxis_transform()  # x in data, y in axes: 1.0 is the top edge
        self.labels = [
            Text(t, 1.0, label, rotation=90, fontsize=7, va="top", ha="right", transform=at_top)
            for t, label in sorted(marks)
        ]
        ax.add_artist(self)

    def set_figure(self, fig: Figure | SubFigure) -> None:
        super().set_figure(fig)
        for label in self.labels:
            label.set_figure(fig)

    def get_children(self) -> list[Artist]:
        return list(self.labels)

    def draw(self, renderer: RendererBase) -> None:
        if not self.get_visible():
            return
        end = -float("inf")  # the right edge of the last label drawn
        for label in self.labels:
            label.set_visible(True)
            box = label.get_window_extent(renderer)
            label.set_visible(box.x0 >= end + self.GAP * box.width)
            if label.get_visible():
                label.draw(renderer)
                end = box.x1


def _draw_marks(ax: Axes, report: MemoryReport, labels: bool) -> None:
    for t, _ in report.series.marks:
        ax.axvline(t, color="tab:orange", linewidth=0.7, alpha=0.7)
    if labels and report.series.marks:
        _MarkLabels(ax, report.series.marks)


class Plotter:
    """The plots sink: one PNG per suite case and sweep in ``--cuzk-plots`` (registered when that is set)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def pytest_cuzk_case_finished(
        self, item: pytest.Item, case: Case, figures: Figures, result: CaseResult
    ) -> None:
        if result.memory is not None:
            plot_memory(result.memory, self.directory / f"{item.name}.png", item.nodeid)

    def pytest_cuzk_scenario_finished(self, item: pytest.Item, case: Case, figures: ScenarioFigures) -> None:
        if isinstance(figures, SweepFigures) and figures.curve:
            plot_sweep(figures, self.directory / f"{item.name}.png")
