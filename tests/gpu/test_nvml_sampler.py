"""On a real NVIDIA GPU: the NVML sampler's peak for a separate process that allocates a known amount.

A separate process (CuPy, plain cudaMalloc) holds 8 GiB for about 2 s with a 4 GiB spike of 250 ms in the
middle. The sampler must measure the plateau and the spike each within 2% of what was allocated above the
process's resting use (its CUDA context), and a 10-20 ms interval must catch the spike.
Skips without NVML, a GPU or CuPy. Run: ``python -m pytest tests/gpu -s``.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from pytest_cuzk.host.info import host_info
from pytest_cuzk.host.nvml import nvml_handles, nvml_session
from pytest_cuzk.measure.memory import DaemonSampler, MemoryReport

GIB = 1 << 30
HELD, SPIKE, SPIKE_S = 8 * GIB, 4 * GIB, 0.25
TOLERANCE = 0.02


def _gpu_skip_reason() -> str | None:
    with nvml_session() as why:
        if why:
            return why
        if not nvml_handles():
            return "NVML sees no GPU"
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (the GPU allocator process needs it)"
    return None


pytestmark = pytest.mark.skipif(bool(reason := _gpu_skip_reason()), reason=reason or "")

# Allocates with raw cudaMalloc (no pool rounding), writes every byte so nothing is lazy, and says what
# it just did on stdout, one word a line, so the sampler can mark each phase.
ALLOCATOR = f"""
import sys, time
import cupy as cp
rt = cp.cuda.runtime
def alloc(n):
    p = rt.malloc(n)
    rt.memset(p, 1, n)
    rt.deviceSynchronize()
    return p
rt.free(alloc(1))  # create the CUDA context: it belongs to the resting use
print("ready", flush=True)
sys.stdin.readline()
held = alloc({HELD})
print("held", flush=True)
time.sleep(0.9)
spike = alloc({SPIKE})
print("spike", flush=True)
time.sleep({SPIKE_S})
rt.free(spike)
rt.deviceSynchronize()
print("spike_end", flush=True)
time.sleep(0.9)
rt.free(held)
rt.deviceSynchronize()
print("freed", flush=True)
time.sleep(0.3)
"""


@pytest.fixture
def allocator() -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", ALLOCATOR], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:  # closes its pipes, not only the process
        assert proc.stdout and proc.stdout.readline().strip() == "ready"
        yield proc
        proc.kill()


def run_allocator(proc: subprocess.Popen[str], interval_s: float) -> MemoryReport:
    assert proc.stdin and proc.stdout
    sampler = DaemonSampler(proc.pid, interval_s=interval_s)
    sampler.start()
    time.sleep(0.1)  # resting samples: the allocator's CUDA context only
    sampler.mark("go")
    proc.stdin.write("go\n")
    proc.stdin.flush()
    for line in proc.stdout:
        sampler.mark(line.strip())
    proc.wait(30)
    return sampler.stop()


def window(report: MemoryReport, start: str | None, end: str) -> list[int]:
    """VRAM samples between two marks (from the first sample when `start` is None)."""
    marks = {label: t for t, label in report.series.marks}
    begin = marks[start] if start else 0.0
    assert report.series.vram_bytes is not None
    return [
        v
        for t, v in zip(report.series.t_s, report.series.vram_bytes, strict=True)
        if begin <= t <= marks[end]
    ]


@pytest.mark.parametrize("interval_s", [0.01, 0.02])
def test_nvml_peak_of_a_separate_gpu_process(allocator: subprocess.Popen[str], interval_s: float) -> None:
    report = run_allocator(allocator, interval_s)
    assert report.vram_available and report.vram_peak_bytes is not None
    resting = statistics.median(window(report, None, "go"))
    plateau = statistics.median(window(report, "held", "spike")) - resting
    peak = report.vram_peak_bytes - resting
    spike_samples = len(window(report, "spike", "spike_end"))
    plateau_err = (plateau - HELD) / HELD
    peak_err = (peak - (HELD + SPIKE)) / (HELD + SPIKE)
    figures = {
        "interval_ms": interval_s * 1000,
        "vram_source": report.vram_source,
        "resting_gib": resting / GIB,
        "plateau_allocated_gib": HELD / GIB,
        "plateau_measured_gib": plateau / GIB,
        "plateau_error_pct": 100 * plateau_err,
        "peak_allocated_gib": (HELD + SPIKE) / GIB,
        "peak_measured_gib": peak / GIB,
        "peak_error_pct": 100 * peak_err,
        "samples_inside_spike": spike_samples,
        "sampler_rate_hz": report.sample_rate_hz,
        "sampler_cpu_pct_of_core": 100 * report.sampler_cpu_s / report.duration_s,
        "sampler_cpu_ms_per_sample": 1000 * report.sampler_cpu_s / report.samples,
    }
    print(f"\n[nvml sampler] {json.dumps(figures)}\n[report] {json.dumps(report.to_dict())}")
    assert abs(plateau_err) <= TOLERANCE
    assert abs(peak_err) <= TOLERANCE, "the 250 ms spike was missed or mismeasured"
    assert spike_samples >= 3


def test_host_info_on_a_gpu_host() -> None:
    info = host_info()
    print(f"\n[host] {info.as_dict()}")
    assert info.gpus and info.gpu_unavailable_reason is None
    assert all(g.name and g.vram_total_bytes > 0 for g in info.gpus)
    assert info.driver_version and info.cuda_driver_version
