"""Memory and GPU telemetry of a proving daemon's process tree while a test runs.

A daemon is a separate process, so in-process tools (tracemalloc, memray) cannot see it: the sampler polls
the daemon's whole process tree from a background thread instead. Polling misses short spikes, so the
exact RSS peak comes from the kernel's high-water mark (VmHWM), reset per test through
``/proc/<pid>/clear_refs`` where the kernel lets us (else the report says the peak is since process start).
GPU memory, utilisation, SM clock and P-state come from NVML (``gpusampler``), per GPU: clocks swing proof
timings by large factors, so they are recorded beside the timings, and a GPU that sat idle is named. The
sampler's own CPU time is split into the process-tree side and the NVML side, so either can be tuned.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

import numpy as np
import psutil

from pytest_cuzk.config.values import MIN_INTERVAL_S
from pytest_cuzk.host.nvml import nvml_handles, nvml_session
from pytest_cuzk.host.proctree import HwmScope, ProcessTree, ProcFile, available_bytes, host_busy_s
from pytest_cuzk.measure.gpu import IDLE_UTIL_PCT, GpuFigures, GpuReader, GpuReading, known, mean

__all__ = ["MIN_INTERVAL_S", "DaemonSampler", "MemoryReport", "MemorySeries"]

TRAVEL_POINTS = 250  # samples of a series sent to the controller: enough for a chart, small in the JSON
TRAVEL_MARKS = 100
JOIN_TIMEOUT_S = 5.0
UNLISTED_GROWTH_BYTES = 256 << 20  # device memory no listed process accounts for grew: pids are hidden
VramSource = Literal["pids", "device"]


@dataclass(frozen=True)
class _Sample:
    t_s: float
    rss_bytes: int
    sys_available_bytes: int
    gpu: GpuReading | None


@dataclass
class MemorySeries:
    """Raw time series (seconds since start) for plots; `vram_bytes` follows the report's `vram_source`."""

    t_s: list[float]
    rss_bytes: list[int]
    sys_available_bytes: list[int]
    vram_bytes: list[int] | None
    device_used_bytes: list[int] | None
    marks: list[tuple[float, str]]

    @classmethod
    def empty(cls) -> MemorySeries:
        return cls([], [], [], None, None, [])

    def downsampled(self, points: int = TRAVEL_POINTS, marks: int = TRAVEL_MARKS) -> MemorySeries:
        """At most ``points`` samples, each the highest of its stretch (the lowest available memory).

        Peaks survive, so a chart of the short series shows what the long one showed; of
        more than ``marks`` marks every n-th is kept.
        """
        starts = np.linspace(0, len(self.t_s), min(len(self.t_s), points), endpoint=False).astype(int)

        def stretches(values: list[int], reduce: np.ufunc = np.maximum) -> list[int]:
            return [int(v) for v in reduce.reduceat(values, starts)] if len(starts) else []

        step = max(1, math.ceil(len(self.marks) / marks))
        return MemorySeries(
            t_s=[round(float(self.t_s[i]), 3) for i in starts],
            rss_bytes=stretches(self.rss_bytes),
            sys_available_bytes=stretches(self.sys_available_bytes, np.minimum),
            vram_bytes=None if self.vram_bytes is None else stretches(self.vram_bytes),
            device_used_bytes=None if self.device_used_bytes is None else stretches(self.device_used_bytes),
            marks=[(round(t, 3), label) for t, label in self.marks[::step]],
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemorySeries:
        return cls(**{**data, "marks": [(float(t), str(label)) for t, label in data.get("marks") or ()]})


@dataclass(frozen=True)
class MemoryReport:
    """Peaks and means of one sampling window; byte, MHz and percent units are in the field names.

    ``to_dict`` carries the scalars and the series downsampled to a few hundred points (the
    full one would bloat the JSON), so a report rebuilt with ``from_dict`` charts on the
    controller of an xdist run as it would where it was sampled.
    """

    samples: int
    interval_s: float
    duration_s: float
    sampler_cpu_s: float
    rss_peak_bytes: int
    rss_mean_bytes: int
    rss_hwm_peak_bytes: int | None
    rss_hwm_scope: HwmScope
    sys_available_min_bytes: int
    daemon_exited: bool
    vram_available: bool
    vram_source: VramSource | None
    vram_unavailable_reason: str | None
    vram_peak_bytes: int | None
    vram_mean_bytes: int | None
    device_mem_used_peak_bytes: int | None
    gpu_util_mean_pct: float | None
    sm_clock_mean_mhz: float | None
    sm_clock_min_mhz: int | None
    pstates: tuple[str, ...]
    daemon_cpu_s: float | None = None  # CPU the daemon's tree used over the window
    # Of the host's CPUs over the window, the share other processes kept busy (neither the daemon
    # nor pytest): on a shared host, what makes two runs of one build differ.
    host_other_cpu_pct: float | None = None
    sampler_tree_cpu_s: float = 0.0  # of sampler_cpu_s: the process tree (/proc) side
    sampler_gpu_cpu_s: float = 0.0  # of sampler_cpu_s: the NVML side
    gpus: tuple[GpuFigures, ...] = ()
    series: MemorySeries = field(repr=False, compare=False, default_factory=MemorySeries.empty)

    @property
    def sample_rate_hz(self) -> float:
        """Samples per second actually achieved (below 1/interval when a sample takes longer than one)."""
        return self.samples / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def rss_effective_peak_bytes(self) -> int:
        """The sampled peak, or the kernel's exact one (VmHWM) when it covers just this test."""
        if self.rss_hwm_scope == "test" and self.rss_hwm_peak_bytes is not None:
            return max(self.rss_peak_bytes, self.rss_hwm_peak_bytes)
        return self.rss_peak_bytes

    def idle_warnings(self) -> list[str]:
        """A GPU that sat idle while another of the host worked: the daemon proved on some GPUs only."""
        if not any(g.util_max_pct is not None and not g.idle for g in self.gpus):
            return []
        return [
            f"GPU {g.index} ({g.name}) sat idle through the case (utilisation never reached "
            f"{IDLE_UTIL_PCT}%) while another GPU worked: the daemon proved on {len(self.gpus) - 1} or fewer "
            f"of the host's {len(self.gpus)} GPUs (check its gpus.devices and CUDA_VISIBLE_DEVICES)"
            for g in self.gpus
            if g.idle
        ]

    def to_dict(self) -> dict[str, Any]:
        """The scalars, JSON-ready, with the achieved sampling rate and the downsampled series."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "series"}
        series = dataclasses.asdict(self.series.downsampled())
        return out | {
            "pstates": list(self.pstates),
            "sample_rate_hz": round(self.sample_rate_hz, 2),
            "gpus": [asdict(g) for g in self.gpus],
            "series": series | {"marks": [list(m) for m in series["marks"]]},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryReport:
        names = {f.name for f in fields(cls)} - {"series"}
        values = {k: v for k, v in data.items() if k in names}
        gpus = tuple(GpuFigures(**g) for g in data.get("gpus") or ())
        series = MemorySeries.from_dict(data["series"]) if data.get("series") else MemorySeries.empty()
        return cls(**{**values, "pstates": tuple(data.get("pstates") or ()), "gpus": gpus}, series=series)


class DaemonSampler:
    """Samples a daemon's process tree from a named background thread between `start()` and `stop()`.

    The thread only appends samples (no pytest calls, no printing); `stop()` joins it and aggregates.
    """

    def __init__(self, pid: int, interval_s: float = 0.1, nvml: bool = True) -> None:
        if interval_s < MIN_INTERVAL_S:
            raise ValueError(
                f"memory sampler interval {interval_s} s is below the minimum, {MIN_INTERVAL_S} s"
            )
        self.pid = pid
        self.interval_s = interval_s
        self._use_nvml = nvml
        self._tree = ProcessTree(pid)
        self._meminfo = ProcFile("")  # opened by start()
        self._gpu: GpuReader | None = None
        self._gpu_why: str | None = "NVML sampling turned off"
        self._stack = ExitStack()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._samples: list[_Sample] = []
        self._marks: list[tuple[float, str]] = []
        self._hwm_scope: HwmScope = "unavailable"
        self._t0 = 0.0
        self._cpu_s = 0.0
        self._tree_cpu_s = 0.0
        self._gpu_cpu_s = 0.0
        self._cpu0 = self._cpu1 = (0.0, 0.0, 0.0, 0.0)

    def start(self) -> None:
        """Reset the tree's RSS high-water marks, open NVML and begin sampling."""
        if self._thread is not None:
            raise RuntimeError("DaemonSampler.start() called twice: use one sampler per window")
        self._hwm_scope = self._tree.reset_hwm()
        self._meminfo = ProcFile("/proc/meminfo")
        self._cpu0 = self._cpu_now()
        if self._use_nvml:
            self._gpu_why = self._stack.enter_context(nvml_session())
            handles = [] if self._gpu_why else nvml_handles()
            self._gpu = GpuReader(handles) if handles else None
            if not handles and not self._gpu_why:
                self._gpu_why = "NVML sees no GPU"
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"cuzk-mem-sampler-{self.pid}", daemon=True)
        self._thread.start()

    def mark(self, label: str) -> None:
        """Record a boundary (a proof submitted or finished) on the sampler's time axis."""
        self._marks.append((time.monotonic() - self._t0, label))

    def rss_peak_so_far(self) -> int | None:
        """The highest tree RSS sampled so far (for a death report while sampling goes on)."""
        samples = list(self._samples)
        return max((sample.rss_bytes for sample in samples), default=None)

    def stop(self) -> MemoryReport:
        """Stop sampling (one last sample is taken) and return the window's report."""
        if self._thread is None:
            raise RuntimeError("DaemonSampler.stop() called before start()")
        self._stop.set()
        self._thread.join(JOIN_TIMEOUT_S)
        self._cpu1 = self._cpu_now()
        if not self._thread.is_alive():  # a thread stuck in NVML must not see it shut down under it
            self._stack.close()
            self._tree.close()
            self._meminfo.close()
        return self._report(list(self._samples), time.monotonic() - self._t0)

    def _run(self) -> None:
        cpu0 = time.thread_time()
        due = time.monotonic()
        while True:
            self._samples.append(self._sample())
            self._cpu_s = time.thread_time() - cpu0
            due = max(due + self.interval_s, time.monotonic())
            if self._stop.wait(due - time.monotonic()):
                break
        self._samples.append(self._sample(final=True))
        self._cpu_s = time.thread_time() - cpu0

    def _sample(self, final: bool = False) -> _Sample:
        cpu0, now = time.thread_time(), time.monotonic()
        rss = self._tree.sample(now)
        avail = available_bytes(self._meminfo)
        cpu1 = time.thread_time()
        gpu = self._gpu.read(now, self._tree.pids(), final) if self._gpu is not None else None
        self._tree_cpu_s += cpu1 - cpu0
        self._gpu_cpu_s += time.thread_time() - cpu1
        return _Sample(now - self._t0, rss, avail, gpu)

    def _cpu_now(self) -> tuple[float, float, float, float]:
        """Now, the host's busy CPU seconds, the daemon tree's and this process's (pytest's)."""
        own = psutil.Process().cpu_times()
        return time.monotonic(), host_busy_s(), self._tree.cpu_s(), own.user + own.system

    def _cpu_share(self) -> tuple[float | None, float | None]:
        """The daemon's CPU seconds and the share of the host's CPUs other processes kept busy."""
        (t0, host0, tree0, own0), (t1, host1, tree1, own1) = self._cpu0, self._cpu1
        if t1 <= t0 or self._tree.exited:
            return None, None
        others = max(0.0, (host1 - host0) - (tree1 - tree0) - (own1 - own0))
        capacity = (t1 - t0) * (psutil.cpu_count() or 1)
        return round(tree1 - tree0, 3), round(min(100.0, 100 * others / capacity), 1)

    def _report(self, samples: list[_Sample], duration_s: float) -> MemoryReport:
        rss = [s.rss_bytes for s in samples] or [0]
        readings = [s.gpu for s in samples if s.gpu is not None]
        gpu = _gpu_summary(readings)
        devices = [d for r in readings for d in r.gpus]
        daemon_cpu, others = self._cpu_share()
        series = MemorySeries(
            t_s=[s.t_s for s in samples],
            rss_bytes=rss,
            sys_available_bytes=[s.sys_available_bytes for s in samples],
            vram_bytes=gpu.vram,
            device_used_bytes=gpu.device_used,
            marks=list(self._marks),
        )
        return MemoryReport(
            samples=len(samples),
            interval_s=self.interval_s,
            duration_s=duration_s,
            sampler_cpu_s=self._cpu_s,
            rss_peak_bytes=max(rss),
            rss_mean_bytes=int(statistics.fmean(rss)),
            rss_hwm_peak_bytes=self._tree.hwm_bytes(),
            rss_hwm_scope=self._hwm_scope,
            sys_available_min_bytes=min((s.sys_available_bytes for s in samples), default=0),
            daemon_exited=self._tree.exited,
            vram_available=self._gpu is not None,
            vram_source=gpu.source,
            vram_unavailable_reason=self._gpu_why,
            vram_peak_bytes=max(gpu.vram) if gpu.vram else None,
            vram_mean_bytes=int(statistics.fmean(gpu.vram)) if gpu.vram else None,
            device_mem_used_peak_bytes=max(gpu.device_used) if gpu.device_used else None,
            gpu_util_mean_pct=mean(d.util_pct for d in devices),
            sm_clock_mean_mhz=mean(d.sm_clock_mhz for d in devices),
            sm_clock_min_mhz=min(known(d.sm_clock_mhz for d in devices), default=None),
            pstates=tuple(f"P{p}" for p in sorted(set(known(d.pstate for d in devices)))),
            daemon_cpu_s=daemon_cpu,
            host_other_cpu_pct=others,
            sampler_tree_cpu_s=self._tree_cpu_s,
            sampler_gpu_cpu_s=self._gpu_cpu_s,
            gpus=self._gpu.figures(readings) if self._gpu is not None else (),
            series=series,
        )


@dataclass(frozen=True)
class _GpuSummary:
    source: VramSource | None
    vram: list[int] | None
    device_used: list[int] | None


def _gpu_summary(readings: Sequence[GpuReading]) -> _GpuSummary:
    """The daemon's VRAM series by pid, or the devices' used memory where pids cannot be told apart."""
    if not readings:
        return _GpuSummary(None, None, None)
    device_used = [sum(known(d.used_bytes for d in r.gpus)) for r in readings]
    lists = [r for r in readings if r.listed]
    unlisted = [r.unlisted_bytes for r in lists] or [0]
    hidden = any(r.unattributed for r in lists) or max(unlisted) - min(unlisted) > UNLISTED_GROWTH_BYTES
    if hidden and not any(r.tree_vram_seen for r in lists):
        return _GpuSummary("device", device_used, device_used)
    return _GpuSummary("pids", [r.tree_vram_bytes for r in readings], device_used)
