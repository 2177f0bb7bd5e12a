"""``cuzk-perf plot``: throughput against host RAM, against GPU, and across builds, as PNG charts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_cuzk.fleet.queries import NO_DATA, best_pool, figure, gpus, group, tops
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import ResultRow
from pytest_cuzk.vocab.units import GIB

__all__ = ["cmd_plot"]


def _plot_ram(ax: Any, rows: list[ResultRow], _builds: list[str]) -> None:
    top = tops(rows)
    ram = [pool[0].run.host.ram_bytes / GIB for pool in top]
    per_hour = [figure(pool, "throughput") or 0 for pool in top]
    ax.scatter(ram, per_hour)
    for pool, x, y in zip(top, ram, per_hour, strict=True):
        ax.annotate(pool[0].run.label or gpus(pool[0]), (x, y), fontsize=7)
    ax.set(xlabel="host RAM (GiB)")


def _plot_gpu(ax: Any, rows: list[ResultRow], _builds: list[str]) -> None:
    best: dict[str, float] = {}
    for pool in tops(rows):  # each host's best pool; of the hosts with the same GPUs, the fastest
        name = gpus(pool[0])
        best[name] = max(best.get(name, 0.0), figure(pool, "throughput") or 0.0)
    names = sorted(best)
    ax.bar(names, [best[n] for n in names])
    ax.tick_params(axis="x", labelsize=7)


def _plot_trend(ax: Any, rows: list[ResultRow], builds: list[str]) -> None:
    for host, series in sorted(group(rows, lambda r: r.run.label or gpus(r)).items()):
        per_build = group(series, lambda r: r.run.daemon_build)
        xs = [i for i, b in enumerate(builds) if b in per_build]
        ys = [figure(best_pool(per_build[builds[i]]), "throughput") or 0 for i in xs]
        ax.plot(xs, ys, marker="o", label=host)
    ax.set_xticks(range(len(builds)), [b[:20] for b in builds], rotation=20, ha="right", fontsize=7)
    ax.legend(fontsize=7)


CHARTS = {
    "throughput_vs_ram.png": (_plot_ram, "best proofs/hour against host RAM"),  # each a best pool's figure
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
