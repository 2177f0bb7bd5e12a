"""Memory plots are real PNG files, with and without GPU data."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.fakenvml import FakeNvml

from pytest_cuzk.measure.memory import DaemonSampler, MemoryReport
from pytest_cuzk.sinks.plots import plot_memory

pytestmark = pytest.mark.e2e  # plots the samples of a real child process

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

HOLDER = "import sys, time; b = b'x' * 80_000_000; print('ok', flush=True); sys.stdin.read()"


def report_of_a_child(fake_gpu: FakeNvml | None = None) -> MemoryReport:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    if fake_gpu:
        fake_gpu.processes = [(proc.pid, 2 << 30)]
    try:
        sampler = DaemonSampler(proc.pid, interval_s=0.01, nvml=fake_gpu is not None)
        sampler.start()
        sampler.mark("proof 1 submitted")
        assert proc.stdout and proc.stdout.readline() == b"ok\n"
        time.sleep(0.1)
        sampler.mark("proof 1 done")
        return sampler.stop()
    finally:
        proc.communicate(timeout=10)


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000  # two panels with lines and text, not an empty canvas


def test_plot_without_gpu_is_a_png(tmp_path: Path) -> None:
    report = report_of_a_child()
    out = plot_memory(report, tmp_path / "plots" / "test_prove[porep-batch1-j1].png", "porep batch1 j1")
    assert out == tmp_path / "plots" / "test_prove[porep-batch1-j1].png"
    assert_png(out)


def test_plot_with_gpu_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = report_of_a_child(FakeNvml(monkeypatch, used=3 << 30))
    assert report.series.vram_bytes is not None
    assert report.vram_peak_bytes == 2 << 30
    assert_png(plot_memory(report, tmp_path / "gpu.png", "with a (fake) GPU"))
