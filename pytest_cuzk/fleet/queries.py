"""Reading the results database for ``cuzk-perf``: grouping tests, their figures and labels.

Every view that pools several runs into one figure pools them here, in ``figure``, by the
metric's own rule (``Metric.combine``): throughput and latency percentiles by the median of the
runs' recorded figures; RSS and VRAM peaks and the slowest proof by the highest. So one set of
runs shows one number in every view, and a pool's p90 never exceeds its max (each run's p90 is
within its own max, and the median of those p90s within the highest max).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pytest_cuzk.measure.figures import METRICS
from pytest_cuzk.results.rows import ResultRow

__all__ = [
    "NO_DATA",
    "best_pool",
    "config",
    "figure",
    "gpu_memory",
    "gpus",
    "group",
    "joined",
    "labels",
    "machine",
    "pools",
    "shown",
    "spread",
    "tops",
    "values",
]

NO_DATA = "no data"
T = TypeVar("T")


def gpus(row: ResultRow) -> str:
    if not row.run.host.gpu_count:
        return "no GPU"
    return f"{row.run.host.gpu_count}x {'/'.join(sorted(set(row.run.host.gpu_models)))}"


def gpu_memory(row: ResultRow) -> int | None:
    """The memory of each of the row's GPUs (NVML's total over them, shared out)."""
    host = row.run.host
    return host.vram_total_bytes // host.gpu_count if host.gpu_count else None


def group(items: Iterable[T], key: Callable[[T], Any]) -> dict[Any, list[T]]:
    """``items`` by ``key``, in the order each key first came, each group in the items' order."""
    out: dict[Any, list[T]] = defaultdict(list)
    for item in items:
        out[key(item)].append(item)
    return out


def values(rows: Iterable[ResultRow], metric: str) -> list[float]:
    """The metric's stored values (its database column) over ``rows``, missing ones left out."""
    return [float(v) for r in rows if (v := getattr(r.test, METRICS[metric].column)) is not None]


def machine(row: ResultRow) -> tuple[str, str]:
    """One rented machine: its hardware, and its provider machine id, else its label, else its hostname."""
    run = row.run
    return run.host.fingerprint, run.host_id or run.label or run.host.hostname


def joined(texts: Iterable[str]) -> str:
    """Distinct non-empty texts, sorted, comma-joined; ``-`` when there are none."""
    return ",".join(sorted({t for t in texts if t})) or "-"


def config(row: ResultRow) -> str:
    return f"batch{row.test.batch_size}-j{row.test.concurrency}"


def figure(rows: Iterable[ResultRow], metric: str) -> float | None:
    """The figure of a pool of runs' tests: the metric's combine rule over their recorded values."""
    found = values(rows, metric)
    return METRICS[metric].combine(found) if found else None


def shown(rows: Iterable[ResultRow], metric: str) -> str:
    """The pool's ``figure`` as its metric prints it under a heading that names the unit."""
    return METRICS[metric].fmt(figure(rows, metric))


def spread(rows: Iterable[ResultRow]) -> str:
    """``low..high``: the lowest and highest of the runs' own throughputs (``-`` when none has one)."""
    found, fmt = values(rows, "throughput"), METRICS["throughput"].fmt
    return f"{fmt(min(found))}..{fmt(max(found))}" if found else "-"


def pools(rows: Iterable[ResultRow]) -> dict[tuple[str, str], list[ResultRow]]:
    """The tests of each build and configuration (batch size, concurrency): what one figure may pool."""
    return group(rows, lambda r: (r.run.daemon_build, config(r)))


def best_pool(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """Of ``rows``' pools, the one with the highest pooled throughput."""
    return max(pools(rows).values(), key=lambda rs: figure(rs, "throughput") or 0.0)


def labels(rows: list[ResultRow]) -> str:
    return ",".join(sorted({r.run.label for r in rows if r.run.label})) or rows[0].run.host.fingerprint[:12]


def tops(rows: Iterable[ResultRow]) -> list[list[ResultRow]]:
    """The best pool of each kind on each host."""
    return [best_pool(rs) for rs in group(rows, lambda r: (r.test.kind, r.run.host.fingerprint)).values()]
