"""Reading the results database for ``cuzk-perf``: grouping tests, their figures and labels."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from pytest_cuzk.measure.figures import METRICS
from pytest_cuzk.results.rows import ResultRow

__all__ = [
    "NO_DATA",
    "best",
    "config",
    "gpu_memory",
    "gpus",
    "group",
    "joined",
    "labels",
    "machine",
    "stat",
    "tops",
    "values",
]

NO_DATA = "no data"


def gpus(row: ResultRow) -> str:
    if not row.run.host.gpu_count:
        return "no GPU"
    return f"{row.run.host.gpu_count}x {'/'.join(sorted(set(row.run.host.gpu_models)))}"


def gpu_memory(row: ResultRow) -> int | None:
    """The memory of each of the row's GPUs (NVML's total over them, shared out)."""
    host = row.run.host
    return host.vram_total_bytes // host.gpu_count if host.gpu_count else None


def group(rows: Iterable[ResultRow], key: Callable[[ResultRow], Any]) -> dict[Any, list[ResultRow]]:
    out: dict[Any, list[ResultRow]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
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


def best(rows: list[ResultRow]) -> ResultRow:
    return max(rows, key=lambda r: r.test.proofs_per_hour or 0.0)


def labels(rows: list[ResultRow]) -> str:
    return ",".join(sorted({r.run.label for r in rows if r.run.label})) or rows[0].run.host.fingerprint[:12]


def stat(fn: Callable[[list[float]], float], vals: list[float], fmt: Callable[[float], str]) -> str:
    return fmt(fn(vals)) if vals else "-"


def tops(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """The best test of each kind on each host."""
    return [best(rs) for rs in group(rows, lambda r: (r.test.kind, r.run.host.fingerprint)).values()]
