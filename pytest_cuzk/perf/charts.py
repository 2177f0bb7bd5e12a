"""``cuzk-perf plot``: throughput against host RAM, against GPU, and across builds, as PNG charts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import ResultRow

from ..wire.units import GIB
from .queries import NO_DATA, best, gpus, group, tops

__all__ = ["cmd_plot"]


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
