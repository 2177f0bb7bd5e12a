"""One frozen record of a finished case's figures, and the registry of the figures people compare.

Everything that reads a case's numbers (the terminal summary, the gates, pytest-benchmark's
``extra_info``, the results database, ``cuzk-perf``) reads a :class:`Figures` by attribute, and
the comparable ones through :data:`METRICS`: one place says what each is called in the JSON and
in the database, its unit, which way is better and how it is printed. ``regression`` is the one
computation of "how much worse".
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .wire.units import format_bytes

if TYPE_CHECKING:
    from .memory import MemoryReport

__all__ = ["METRICS", "Figures", "Metric", "ProofTimings", "regression"]


@dataclass(frozen=True)
class Metric:
    """A figure that can be gated and compared across runs."""

    name: str  # what users type: --cuzk-compare-fail throughput:5%
    attr: str  # the Figures attribute, also the extra_info key
    column: str  # the results database column
    label: str  # the summary table's heading
    unit: str
    higher_is_better: bool
    combine: Callable[[list[float]], float]  # how several runs of one build combine
    fmt: Callable[[float | None], str]  # for a column headed with the unit
    suffix: str = ""  # what ``show`` adds where no heading names the unit

    def value(self, figures: Figures) -> float | None:
        value = getattr(figures, self.attr)
        return None if value is None else float(value)

    def show(self, value: float | None) -> str:
        """The value with its unit, for sentences."""
        return self.fmt(value) + (self.suffix if value is not None else "")


def _num(spec: str) -> Callable[[float | None], str]:
    return lambda v: "n/a" if v is None else spec.format(v)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "throughput",
            "throughput_proofs_per_hour",
            "proofs_per_hour",
            "proofs/h",
            "proofs/h",
            True,
            statistics.median,
            _num("{:.1f}"),
            "/h",
        ),
        Metric("p50", "latency_p50_s", "p50_s", "p50 s", "s", False, statistics.median, _num("{:.2f}"), " s"),
        Metric("p90", "latency_p90_s", "p90_s", "p90 s", "s", False, statistics.median, _num("{:.2f}"), " s"),
        Metric("max", "latency_max_s", "max_s", "max s", "s", False, statistics.median, _num("{:.2f}"), " s"),
        # Peaks combine by max: the worst run is the one that runs out of memory.
        Metric("rss_peak", "rss_peak_bytes", "rss_peak_bytes", "RSS peak", "bytes", False, max, format_bytes),
        Metric(
            "vram_peak", "vram_peak_bytes", "vram_peak_bytes", "VRAM peak", "bytes", False, max, format_bytes
        ),
    )
}


def regression(metric: Metric, before: float | None, after: float | None) -> float | None:
    """Percent by which ``after`` is worse than ``before`` (negative: better); None when not comparable."""
    if before is None or after is None or before == 0:
        return None
    change = (after - before) / before * 100
    return -change if metric.higher_is_better else change


@dataclass(frozen=True)
class ProofTimings:
    """The daemon's own mean phase times over a case's successful proofs (milliseconds)."""

    queue_wait_ms: float | None = None
    synthesis_ms: float | None = None
    gpu_compute_ms: float | None = None
    total_ms: float | None = None


@dataclass(frozen=True)
class Figures:
    """What one finished suite case measured; built once, then only read.

    ``rss_peak_bytes`` is the higher of the sampled peak and the kernel's exact high-water
    mark when that mark covers just this test.
    """

    test: str
    label: str
    kind: str
    batch_size: int
    concurrency: int
    proofs_ok: int
    proofs_failed: int
    wall_s: float
    throughput_proofs_per_hour: float
    latency_p50_s: float | None
    latency_p90_s: float | None
    latency_max_s: float | None
    timings: ProofTimings = field(default_factory=ProofTimings)
    rss_peak_bytes: int | None = None
    vram_peak_bytes: int | None = None
    memory: MemoryReport | None = None
    failures: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values: pytest-benchmark's extra_info and the xdist wire format."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["timings"] = dataclasses.asdict(self.timings)
        out["memory"] = self.memory.to_dict() if self.memory is not None else None
        out["failures"] = list(self.failures)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Figures:
        """Rebuild a record sent by :meth:`to_dict` (from an xdist worker, or a saved run)."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["timings"] = ProofTimings(**(data.get("timings") or {}))
        from .memory import MemoryReport  # psutil and NVML load only in runs that measure

        memory = data.get("memory")
        values["memory"] = MemoryReport.from_dict(memory) if memory else None
        values["failures"] = tuple(data.get("failures") or ())
        return cls(**values)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (``q`` in 0..100); None when there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
