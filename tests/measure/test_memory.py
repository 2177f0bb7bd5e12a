"""The daemon memory sampler against real child processes that allocate known amounts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest
from helpers.fakenvml import FakeNvml

from pytest_cuzk.measure.memory import TRAVEL_MARKS, TRAVEL_POINTS, DaemonSampler, MemoryReport, MemorySeries

pytestmark = pytest.mark.e2e  # samples real child processes

MB = 1_000_000

# A stand-in daemon driven over stdin, one command a line, answering "ok" once the command is done:
# alloc NAME BYTES | free NAME | spike BYTES MS | spawn (start a child running this same program)
# | kid CMD... (pass CMD to the last child and wait for its ok) | exit
CHILD = r"""
import subprocess, sys, time
held, kids = {}, []
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "alloc":
        held[args[0]] = b"x" * int(args[1])  # b"x" * n writes every page, so it is resident
    elif cmd == "free":
        del held[args[0]]
    elif cmd == "spike":
        spike = b"x" * int(args[0])
        time.sleep(int(args[1]) / 1000)
        del spike
    elif cmd == "spawn":
        kid = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        kids.append(kid)
    elif cmd == "kid":
        kids[-1].stdin.write((" ".join(args) + "\n").encode())
        kids[-1].stdin.flush()
        kids[-1].stdout.readline()
    elif cmd == "exit":
        break
    print("ok", flush=True)
for kid in kids:
    kid.stdin.close()
    kid.wait()
"""


class Child:
    """A running stand-in daemon."""

    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.pid = self.proc.pid

    def cmd(self, line: str) -> None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok", f"child did not acknowledge {line!r}"

    def close(self) -> None:
        """Ends it by closing its stdin if it still runs; its pipes are closed either way."""
        with self.proc:
            if self.proc.poll() is None:
                assert self.proc.stdin
                self.proc.stdin.close()
                self.proc.wait(10)


@pytest.fixture
def child(tmp_path: Path) -> Iterator[Child]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    c = Child(script)
    c.cmd("alloc warmup 1")  # interpreter started and settled: later growth is ours
    yield c
    c.close()


def sample(child: Child, actions: list[str], interval_s: float = 0.02, hold_s: float = 0.3) -> MemoryReport:
    sampler = DaemonSampler(child.pid, interval_s=interval_s, nvml=False)
    sampler.start()
    deadline = time.monotonic() + 10
    while sampler.rss_peak_so_far() is None and time.monotonic() < deadline:
        time.sleep(0.005)  # the resting RSS is sampled before the first action, however loaded the machine
    time.sleep(interval_s * 2)
    for action in actions:
        sampler.mark(action)
        child.cmd(action)
        time.sleep(hold_s)
    return sampler.stop()


def within(measured: int, expected: int, rel: float) -> bool:
    return abs(measured - expected) <= rel * expected


def test_rss_peak_matches_a_known_allocation(child: Child) -> None:
    report = sample(child, [f"alloc a {200 * MB}", "free a"])
    resting = report.series.rss_bytes[0]
    growth = report.rss_peak_bytes - resting
    assert within(growth, 200 * MB, 0.03), f"polled peak grew {growth / MB:.1f} MB for a 200 MB allocation"
    assert report.rss_hwm_scope == "test"
    assert report.rss_hwm_peak_bytes is not None
    assert within(report.rss_hwm_peak_bytes - resting, 200 * MB, 0.03)
    assert report.series.rss_bytes[-1] - resting < 20 * MB, "RSS after free must fall back"
    assert report.rss_mean_bytes < report.rss_peak_bytes


def test_vmhwm_catches_a_spike_that_slow_polling_can_miss(child: Child) -> None:
    report = sample(child, [f"spike {150 * MB} 30"], interval_s=0.2, hold_s=0.05)
    resting = report.series.rss_bytes[0]
    assert report.rss_hwm_peak_bytes is not None
    assert report.rss_hwm_peak_bytes - resting >= 0.97 * 150 * MB, "the kernel high-water mark saw the spike"
    # The kernel keeps RSS in per-CPU counters that it folds in batches, so VmHWM and a polled RSS can
    # disagree by a few hundred KiB; the figure we report takes the larger of the two.
    assert report.rss_hwm_peak_bytes >= report.rss_peak_bytes - 2 * MB
    assert report.rss_effective_peak_bytes - resting >= 0.97 * 150 * MB, "the reported peak has the spike"


def test_clear_refs_resets_the_peak_per_window(child: Child) -> None:
    first = sample(child, [f"alloc a {150 * MB}", "free a"])
    second = sample(child, ["alloc b 1"])
    if second.rss_hwm_scope != "test":
        pytest.skip("this kernel does not let us reset VmHWM through /proc/<pid>/clear_refs")
    assert first.rss_hwm_peak_bytes and second.rss_hwm_peak_bytes
    assert first.rss_hwm_peak_bytes - first.series.rss_bytes[0] >= 0.97 * 150 * MB
    assert second.rss_hwm_peak_bytes - second.series.rss_bytes[0] < 10 * MB, "peak not reset between windows"


def test_process_tree_includes_children_and_grandchildren(child: Child) -> None:
    child.cmd("spawn")
    child.cmd("kid spawn")
    child.cmd("kid alloc warmup 1")  # each process pages in its code once: not part of the measured growth
    child.cmd("kid kid alloc warmup 1")
    report = sample(child, [f"kid alloc k {50 * MB}", f"kid kid alloc g {100 * MB}"])
    growth = report.rss_peak_bytes - report.series.rss_bytes[0]
    assert within(growth, 150 * MB, 0.05), f"tree grew {growth / MB:.1f} MB, expected 150 MB over 3 processes"
    assert report.rss_hwm_peak_bytes is not None
    assert report.rss_hwm_peak_bytes >= report.rss_peak_bytes - 2 * MB  # per-CPU counter slack, as above


def test_daemon_exiting_mid_sampling_is_reported_not_raised(child: Child) -> None:
    sampler = DaemonSampler(child.pid, interval_s=0.01, nvml=False)
    sampler.start()
    child.cmd(f"alloc a {50 * MB}")
    time.sleep(0.05)
    child.close()
    time.sleep(0.35)  # past one tree refresh
    report = sampler.stop()
    assert report.daemon_exited
    assert report.series.rss_bytes[-1] == 0
    assert report.rss_peak_bytes >= 50 * MB
    assert report.rss_hwm_peak_bytes is not None and report.rss_hwm_peak_bytes >= 50 * MB


def test_sampler_on_a_pid_that_does_not_exist() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    sampler = DaemonSampler(dead.pid, interval_s=0.01, nvml=False)
    sampler.start()
    report = sampler.stop()
    assert report.daemon_exited
    assert report.rss_peak_bytes == 0
    assert report.rss_hwm_scope == "unavailable"
    assert report.rss_hwm_peak_bytes is None


def test_without_gpu_the_vram_fields_say_unavailable(child: Child) -> None:
    report = sample(child, ["alloc a 1"], hold_s=0.05)
    assert report.vram_available is False
    assert report.vram_unavailable_reason == "NVML sampling turned off"
    assert report.vram_peak_bytes is None and report.vram_mean_bytes is None
    assert report.series.vram_bytes is None
    assert report.pstates == ()


def test_missing_nvml_library_is_reported_not_raised(child: Child, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", missing)
    sampler = DaemonSampler(child.pid, interval_s=0.01)
    sampler.start()
    report = sampler.stop()
    assert report.vram_available is False
    assert "NVML unavailable" in (report.vram_unavailable_reason or "")
    assert report.to_dict()["vram_available"] is False


def test_gpu_memory_is_attributed_to_the_daemon_pids(child: Child, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(monkeypatch, used=5 << 30)
    fake.processes = [(child.pid, 3 << 30), (1, 1 << 30)]  # pid 1 exists here but is not ours
    sampler = DaemonSampler(child.pid, interval_s=0.01)
    sampler.start()
    time.sleep(0.05)
    report = sampler.stop()
    assert (report.vram_source, report.vram_peak_bytes, report.vram_mean_bytes) == ("pids", 3 << 30, 3 << 30)
    assert report.device_mem_used_peak_bytes == 5 << 30
    assert (report.gpu_util_mean_pct, report.sm_clock_mean_mhz, report.sm_clock_min_mhz) == (87, 1980, 1980)
    assert report.pstates == ("P0",)
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_gpu_pids_from_another_namespace_fall_back_to_device_memory(
    child: Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeNvml(monkeypatch, used=7 << 30)
    fake.processes = [(4_000_000, None)]  # a host pid we cannot see, size not reported (as in some sandboxes)
    sampler = DaemonSampler(child.pid, interval_s=0.01)
    sampler.start()
    report = sampler.stop()
    assert report.vram_source == "device"
    assert report.vram_peak_bytes == 7 << 30


def test_gpu_memory_growing_with_no_process_listed_falls_back_to_device_memory(
    child: Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeNvml(monkeypatch, used=1 << 30)  # some sandboxes list no GPU processes at all
    sampler = DaemonSampler(child.pid, interval_s=0.01)
    sampler.start()
    time.sleep(0.05)
    fake.used = 9 << 30
    time.sleep(0.05)
    report = sampler.stop()
    assert (report.vram_source, report.vram_peak_bytes) == ("device", 9 << 30)


def test_a_daemon_without_gpu_memory_reads_zero_not_the_device(
    child: Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeNvml(monkeypatch, used=7 << 30).processes = [(1, 1 << 30)]
    sampler = DaemonSampler(child.pid, interval_s=0.01)
    sampler.start()
    report = sampler.stop()
    assert (report.vram_source, report.vram_peak_bytes) == ("pids", 0)


def test_extra_info_has_units_in_key_names_and_is_json(child: Child) -> None:
    report = sample(child, [f"alloc a {10 * MB}"], hold_s=0.05)
    info = report.to_dict()
    for key in ("rss_peak_bytes", "rss_mean_bytes", "rss_hwm_peak_bytes", "rss_hwm_scope", "vram_available"):
        assert key in info
    for key in ("vram_peak_bytes", "vram_mean_bytes", "sys_available_min_bytes", "sampler_cpu_s"):
        assert key in info
    units = ("_bytes", "_s", "_pct", "_mhz", "_hz")
    numeric = [k for k, v in info.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    assert all(k.endswith(units) or k == "samples" for k in numeric), numeric
    again = MemoryReport.from_dict(json.loads(json.dumps(info)))
    assert again == report
    assert max(again.series.rss_bytes) == max(report.series.rss_bytes), "the series travels with its peak"
    assert again.series.marks == report.series.downsampled().marks


def test_a_long_series_travels_downsampled_with_its_peaks() -> None:
    n = 10_000
    rss = [100 + (i % 97) for i in range(n)]
    rss[4321] = 5000  # one short spike
    series = MemorySeries(
        t_s=[i * 0.01 for i in range(n)],
        rss_bytes=rss,
        sys_available_bytes=[10_000 - (i % 50) for i in range(n)],
        vram_bytes=[7] * n,
        device_used_bytes=None,
        marks=[(i * 0.5, f"wave {i}") for i in range(400)],
    )
    short = series.downsampled()
    assert len(short.t_s) == len(short.rss_bytes) == TRAVEL_POINTS
    assert max(short.rss_bytes) == 5000, "a spike between kept samples is not lost"
    assert min(short.sys_available_bytes) == min(series.sys_available_bytes)
    assert short.t_s[0] == 0.0 and short.t_s == sorted(short.t_s)
    assert (short.vram_bytes or [])[:1] == [7] and short.device_used_bytes is None
    assert 0 < len(short.marks) <= TRAVEL_MARKS and short.marks[0] == (0.0, "wave 0")


def test_marks_and_sampler_cost_are_recorded(child: Child) -> None:
    report = sample(child, ["alloc a 1", "alloc b 1"], interval_s=0.01, hold_s=0.1)
    assert [label for _, label in report.series.marks] == ["alloc a 1", "alloc b 1"]
    times = [t for t, _ in report.series.marks]
    assert 0 < times[0] < times[1] < report.duration_s
    assert report.samples >= 10
    assert 0 < report.sampler_cpu_s < report.duration_s
    assert report.sample_rate_hz > 0


def test_misuse_is_refused_with_a_clear_error(child: Child) -> None:
    with pytest.raises(ValueError, match=r"interval 0\.001 s is below the minimum"):
        DaemonSampler(child.pid, interval_s=0.001)
    sampler = DaemonSampler(child.pid, interval_s=0.01, nvml=False)
    with pytest.raises(RuntimeError, match=r"stop\(\) called before start\(\)"):
        sampler.stop()
    sampler.start()
    with pytest.raises(RuntimeError, match="called twice"):
        sampler.start()
    sampler.stop()


def test_each_gpu_has_its_own_figures_and_an_idle_one_is_named(
    child: Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeNvml(monkeypatch, used=3 << 30, devices=2)
    fake.idle = {1}
    sampler = DaemonSampler(child.pid, interval_s=0.01)
    sampler.start()
    time.sleep(0.6)  # past one slow read: utilisation and clocks are read twice a second
    report = sampler.stop()
    busy, idle = report.gpus
    assert (busy.index, busy.name, busy.used_peak_bytes, busy.util_mean_pct) == (
        0,
        "NVIDIA H200",
        3 << 30,
        87,
    )
    assert (idle.util_mean_pct, idle.util_max_pct, idle.sm_clock_mean_mhz) == (0, 0, 1980)
    assert not busy.idle and idle.idle
    (warning,) = report.idle_warnings()
    assert warning.startswith("GPU 1 (NVIDIA H200) sat idle through the case (utilisation never reached 5%)")
    assert MemoryReport.from_dict(json.loads(json.dumps(report.to_dict()))).gpus == report.gpus


def test_a_host_whose_gpus_all_idle_gets_no_idle_warning(
    child: Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeNvml(monkeypatch, devices=2).idle = {
        0,
        1,
    }  # a daemon that proves on the CPU, like the reference engine
    sampler = DaemonSampler(child.pid, interval_s=0.01)
    sampler.start()
    time.sleep(0.6)
    assert sampler.stop().idle_warnings() == []


def test_nvml_is_asked_for_little_between_its_slow_reads(
    child: Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeNvml(monkeypatch, used=1 << 30)
    calls: dict[str, int] = {}
    for name in (
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetComputeRunningProcesses",
    ):
        original = getattr(pynvml, name)

        def counted(*args, _name=name, _fn=original):
            calls[_name] = calls.get(_name, 0) + 1
            return _fn(*args)

        monkeypatch.setattr(pynvml, name, counted)
    fake.processes = [(child.pid, 1 << 30)]
    sampler = DaemonSampler(child.pid, interval_s=0.01)
    sampler.start()
    time.sleep(0.3)
    fake.used = 5 << 30  # the daemon allocates 4 GiB between two process lists
    time.sleep(0.3)
    report = sampler.stop()
    assert calls["nvmlDeviceGetMemoryInfo"] == report.samples, "device memory at every sample"
    assert calls["nvmlDeviceGetUtilizationRates"] <= 4, "utilisation twice a second (and at the end)"
    assert calls["nvmlDeviceGetComputeRunningProcesses"] <= 3, "process lists once a second (and at the end)"
    assert report.vram_source == "pids" and report.vram_peak_bytes == 5 << 30, "growth seen between lists"
