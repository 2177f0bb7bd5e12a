"""One frozen record of a finished case's figures, and the registry of the figures people compare.

Everything that reads a case's numbers (the terminal summary, the gates, pytest-benchmark's
``extra_info``, the results database, ``cuzk-perf``) reads a :class:`Figures` by attribute, and
the comparable ones through :data:`METRICS`: one place says what each is called in the JSON and
in the database, its unit, which way is better, how it is printed, and which raw samples it is
an estimate of (so a comparison can test it). ``regression`` is the one computation of "how much
worse" (a point estimate; ``comparison`` adds the interval and the test).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_cuzk.measure.stats import Estimator, Quantile, Rate
from pytest_cuzk.vocab.units import format_bytes

if TYPE_CHECKING:
    from pytest_cuzk.measure.memory import MemoryReport
    from pytest_cuzk.measure.paired import PairedAB

__all__ = [
    "METRICS",
    "STAGES",
    "Figures",
    "Metric",
    "ProofTimings",
    "Samples",
    "regression",
    "worse_interval",
]


@dataclass(frozen=True)
class Metric:
    """A figure that can be gated and compared across runs."""

    name: str  # what users type: --cuzk-compare-fail throughput:5%
    attr: str  # the Figures attribute, also the extra_info key
    column: str  # the results database column
    label: str  # the summary table's heading
    unit: str
    higher_is_better: bool
    combine: Callable[[list[float]], float]  # how several runs pool (fleet.queries.figure, every view)
    fmt: Callable[[float | None], str]  # for a column headed with the unit
    suffix: str = ""  # what ``show`` adds where no heading names the unit
    sample: str | None = None  # the Samples series it estimates; None: one value per run (a peak)
    estimator: Estimator | None = None  # how the figure is computed from that series

    def value(self, figures: Figures) -> float | None:
        value = getattr(figures, self.attr)
        return None if value is None else float(value)

    def show(self, value: float | None) -> str:
        """The value with its unit, for sentences."""
        return self.fmt(value) + (self.suffix if value is not None else "")


def _num(spec: str) -> Callable[[float | None], str]:
    return lambda v: "n/a" if v is None else spec.format(v)


def _latency(q: int) -> Metric:
    """A latency percentile: an estimate of the proofs' latencies, so it can be tested."""
    name = f"p{q}"
    fmt, median = _num("{:.2f}"), statistics.median
    fig, column, label = f"latency_{name}_s", f"{name}_s", f"{name} s"
    return Metric(name, fig, column, label, "s", False, median, fmt, " s", "latency_s", Quantile(q))


def _stage(name: str, sample: str, label: str) -> Metric:
    """A daemon's phase time per proof, the median proof's: a GPU-kernel regression shows here.

    Throughput moves with the host's CPUs too, so drift there can hide a slower GPU stage.
    """
    attr = f"{name}_p50_ms"
    fmt = _num("{:.1f}")
    return Metric(name, attr, attr, label, "ms", False, statistics.median, fmt, " ms", sample, Quantile(50))


STAGES = (
    ("gpu", "gpu_compute_ms", "GPU ms", "GPU (summed over partitions)"),
    ("synthesis", "synthesis_ms", "synth ms", "synth (summed)"),
    ("queue_wait", "queue_wait_ms", "queue ms", "queue"),
)
"""The per-proof stage figures: (metric name, ``Samples`` series, the table's heading, the summary's label).

cuzk's GPU and synthesis times of a proof are sums over its partitions (ten for a PoRep), so
they can exceed the proof's latency; the summary's labels say so, apart from a partition's own.
"""


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
            sample="window_s_per_proof",
            estimator=Rate(),
        ),
        *(_latency(q) for q in (50, 90, 99)),
        *(_stage(name, sample, heading) for name, sample, heading, _ in STAGES),
        # The slowest proof is one proof: no sample to test, compared as measured. Runs combine by
        # max: the pool's slowest proof is the slowest of any run, so no pooled percentile passes it.
        Metric("max", "latency_max_s", "max_s", "max s", "s", False, max, _num("{:.2f}"), " s"),
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


def worse_interval(metric: Metric, ratio: tuple[float, float]) -> tuple[float, float]:
    """An interval of after/before as percent worse, the lower end first."""
    lo, hi = (regression(metric, 1.0, r) for r in ratio)
    assert lo is not None and hi is not None, "a ratio to 1 is always comparable"
    return min(lo, hi), max(lo, hi)


@dataclass(frozen=True)
class ProofTimings:
    """The daemon's own mean phase times over a case's successful proofs (milliseconds)."""

    queue_wait_ms: float | None = None
    synthesis_ms: float | None = None
    gpu_compute_ms: float | None = None
    total_ms: float | None = None


@dataclass(frozen=True)
class Samples:
    """Every measured proof's raw timings and every wave's duration: what a later comparison tests.

    Per successful proof: the latency the client saw (SubmitProof to answer) and the daemon's
    own phase times. Per wave: its wall time (first submit to last answer), how many proofs it
    submitted and the measurement window it belongs to.
    """

    latency_s: tuple[float, ...] = ()
    queue_wait_ms: tuple[int, ...] = ()
    synthesis_ms: tuple[int, ...] = ()
    gpu_compute_ms: tuple[int, ...] = ()
    total_ms: tuple[int, ...] = ()
    wave_s: tuple[float, ...] = ()
    wave_size: tuple[int, ...] = ()
    wave_window: tuple[int, ...] = ()
    # Per partition of each successful proof, from the daemon's /status (cuzk's pipelines), where known
    partition_synth_ms: tuple[int, ...] = ()
    partition_gpu_ms: tuple[int, ...] = ()

    def series(self, name: str) -> list[float]:
        """A series by name; ``window_s_per_proof`` (each window's seconds per proof) is derived.

        Throughput is resampled by window, not by wave: the host's speed drifts over seconds, so
        neighbouring waves are alike and an interval over waves is too narrow (on a 2-core host,
        ±1.2% over 400 waves where the same run's 10 windows give ±3.5%). A baseline saved
        before windows were recorded has no such series.
        """
        if name == "window_s_per_proof":
            return list(self.windows().values())
        return [float(v) for v in getattr(self, name)]

    def windows(self) -> dict[int, float]:
        """Each measurement window's seconds per proof, by window number, in order."""
        if len(self.wave_window) != len(self.wave_s):
            return {}
        seconds: dict[int, float] = {}
        proofs: dict[int, int] = {}
        for window, s, n in zip(self.wave_window, self.wave_s, self.wave_size, strict=True):
            seconds[window] = seconds.get(window, 0.0) + s
            proofs[window] = proofs.get(window, 0) + n
        return {w: seconds[w] / proofs[w] for w in sorted(seconds) if proofs[w]}

    def to_dict(self) -> dict[str, list[Any]]:
        return {f.name: list(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Samples:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: tuple(v) for k, v in data.items() if k in names})

    @classmethod
    def pooled(cls, parts: list[Samples]) -> Samples:
        """Several runs' samples as one; each run's windows are numbered after the previous run's."""
        names = [f.name for f in dataclasses.fields(cls) if f.name != "wave_window"]
        joined = {n: tuple(v for p in parts for v in getattr(p, n)) for n in names}
        windows: list[int] = []
        for part in parts:
            if len(part.wave_window) != len(part.wave_s):
                return cls(**joined)  # a run without windows: the pool has none
            first = max(windows) + 1 if windows else 0
            windows += [first + w for w in part.wave_window]
        return cls(**joined, wave_window=tuple(windows))


@dataclass(frozen=True)
class Figures:
    """What one finished suite case measured; built once, then only read.

    ``rss_peak_bytes`` is the higher of the sampled peak and the kernel's exact high-water
    mark when that mark covers just this test. A figure that is None says why in
    ``na_reasons`` (keyed by the attribute), e.g. a p99 of 20 proofs or VRAM without NVML.
    Throughput counts the timed waves only: requests are built and proofs checked between them.
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
    latency_p99_s: float | None = None
    throughput_proofs_per_hour_ci: tuple[float, float] | None = None  # 95%, Student's t over windows
    throughput_cv: float | None = None  # of the windows' seconds per proof
    latency_cv: float | None = None  # of the proofs' latencies
    stabilised: bool = False  # the last windows agreed within --cuzk-stability, the proofs did not drift
    stability: str = ""  # what the stability rule found (stable, too few proofs, drifting)
    windows: int = 0  # complete measurement windows
    waves: int = 0
    stop_reason: str = ""
    measured_s: float = 0.0  # the timed waves' wall time
    untimed_s: float = 0.0  # the plugin's own work between waves: requests, checks, verification
    plugin_share_pct: float | None = None  # client and transport time over the daemon's total_ms
    status_memory_peak_bytes: int | None = None  # the daemon's own /status memory.used_bytes peak
    na_reasons: dict[str, str] = field(default_factory=dict)
    samples: Samples = field(default_factory=Samples)
    ab: PairedAB | None = None  # --cuzk-ab: the control build's figures and the paired change
    failed: str = ""  # why the case failed part-way: its figures are what it measured before
    gpu_p50_ms: float | None = None  # the median proof's GPU time (summed over its partitions), as reported
    synthesis_p50_ms: float | None = None  # the median proof's synthesis time (summed over its partitions)
    queue_wait_p50_ms: float | None = None  # the median proof's wait in the daemon's queue

    def why_na(self, attr: str) -> str | None:
        """Why a figure is None (None when it has a value or nobody said)."""
        return self.na_reasons.get(attr) if getattr(self, attr) is None else None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values: pytest-benchmark's extra_info and the xdist wire format."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["timings"] = dataclasses.asdict(self.timings)
        out["memory"] = self.memory.to_dict() if self.memory is not None else None
        out["failures"] = list(self.failures)
        ci = self.throughput_proofs_per_hour_ci
        out["throughput_proofs_per_hour_ci"] = list(ci) if ci is not None else None
        out["na_reasons"] = dict(self.na_reasons)
        out["samples"] = self.samples.to_dict()
        out["ab"] = self.ab.to_dict() if self.ab is not None else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Figures:
        """Rebuild a record sent by :meth:`to_dict` (from an xdist worker, or a saved run)."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["timings"] = ProofTimings(**(data.get("timings") or {}))
        from pytest_cuzk.measure.memory import MemoryReport

        memory = data.get("memory")
        values["memory"] = MemoryReport.from_dict(memory) if memory else None
        values["failures"] = tuple(data.get("failures") or ())
        ci = data.get("throughput_proofs_per_hour_ci")
        values["throughput_proofs_per_hour_ci"] = (float(ci[0]), float(ci[1])) if ci else None
        values["na_reasons"] = dict(data.get("na_reasons") or {})
        values["samples"] = Samples.from_dict(data.get("samples") or {})
        if data.get("ab"):
            from pytest_cuzk.measure.paired import PairedAB

            values["ab"] = PairedAB.from_dict(data["ab"])
        return cls(**values)
