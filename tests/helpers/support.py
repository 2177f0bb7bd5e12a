"""Helpers shared by the plugin's end-to-end tests (inner pytest runs)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import pytest

SUITE = Path(__file__).resolve().parents[2] / "pytest_cuzk" / "suite"
PROVE_SOURCE = (SUITE / "test_prove.py").read_text()
SCENARIOS_SOURCE = (SUITE / "test_scenarios.py").read_text()
# Inner runs measure exactly two proofs a case unless a test asks for more (both flags: the
# last of a repeated flag wins): the measurement plan is tested on its own, in seconds.
# They keep the matrix the suite had before concurrency 2 and batch size 1 alone became the
# default (every kind at batch 1, the batchable at 2 too, concurrency 1); the default is tested
# on its own.
QUICK_PLAN = ("--cuzk-proofs=2", "--cuzk-max-proofs=2", "--cuzk-batch-sizes=1,2", "--cuzk-concurrency=1")
# A memory report of a host without NVML and with nothing else sampled (MemoryReport.from_dict).
QUIET_MEMORY = dict(
    samples=1, interval_s=0.1, duration_s=1.0, sampler_cpu_s=0.0, rss_peak_bytes=1, rss_mean_bytes=1,
    rss_hwm_peak_bytes=None, rss_hwm_scope="unavailable", sys_available_min_bytes=1, daemon_exited=False,
    vram_available=False, vram_source=None, vram_unavailable_reason="NVML unavailable: no driver",
    vram_peak_bytes=None, vram_mean_bytes=None, device_mem_used_peak_bytes=None, gpu_util_mean_pct=None,
    sm_clock_mean_mhz=None, sm_clock_min_mhz=None, pstates=[],
)  # fmt: skip


def c1_wrapper(sector: int, pad: int) -> bytes:
    """A C1 output wrapper in Curio's shape, about ``pad`` bytes of challenge proofs inside."""
    challenge = {"pad": random.Random(sector).randbytes(pad // 20).hex()}
    inner = {
        "registered_proof": "StackedDrg32GiBV1_1",
        "vanilla_proofs": {"StackedDrg32GiBV1": [[challenge]] * 10},
        **{k: [sector] * 32 for k in ("comm_r", "comm_d", "replica_id", "seed", "ticket")},
    }
    phase1 = base64.b64encode(json.dumps(inner).encode()).decode()
    return json.dumps({"SectorNum": sector, "Phase1Out": phase1, "SectorSize": 34359738368}).encode()


def process_gone(pid: int) -> bool:
    """The process has exited (a zombie awaiting its parent counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@dataclass
class RefDaemons:
    """Reference engines started by a test, to attach to: their addresses, data and param cache."""

    addresses: list[str]
    manifest: Path
    params: Path
    procs: list[subprocess.Popen[bytes]]

    def all_running(self) -> bool:
        return all(p.poll() is None for p in self.procs)


@contextmanager
def ref_daemons(tmp_path: Path, params: Path, count: int = 1, config: str = "") -> Iterator[RefDaemons]:
    """Generate data once and start ``count`` cuzk-ref daemons on unix sockets sharing ``params``.

    ``params`` is the param cache (the session's ``ref_params``, so trusted setup runs once);
    ``config`` is added to their TOML (``[ref]`` or ``[ref.faults]`` tables).
    """
    cli = [sys.executable, "-m", "pytest_cuzk.refengine.cli"]
    data = tmp_path / "data"
    subprocess.run([*cli, "gen-data", str(data)], check=True, stdout=subprocess.DEVNULL)
    toml = tmp_path / "ref.toml"
    toml.write_text(f'[srs]\nparam_cache = "{params}"\n{config}')
    addresses = [f"unix://{tmp_path / f'ref{i}.sock'}" for i in range(count)]
    procs = [
        subprocess.Popen(
            [*cli, "-c", str(toml), "-l", addr], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for addr in addresses
    ]
    try:
        yield RefDaemons(addresses, data / "manifest.toml", params, procs)
    finally:
        for proc in procs:
            proc.terminate()  # SIGTERM: stops either behaviour
            proc.wait(10)


def hears_like_a_terminal(sig: int) -> Callable[[], None]:
    """A ``preexec_fn`` giving ``sig`` its default disposition in the child, as a terminal's would.

    A suite started in the background inherits SIGINT ignored, and the plugin leaves an ignored
    signal alone: an inner run sent a Ctrl-C there would never hear it.
    """
    return partial(signal.signal, sig, signal.SIG_DFL)


def not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """An inner pytest run is not an xdist worker, even when the test running it is one."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def run_ref_case(
    case: tuple[str, ...],
    tmp: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout_s: float = 400,
    preexec_fn: Callable[[], None] | None = None,
) -> tuple[int, str, float]:
    """One fresh pytest of the packaged ``test_prove`` on the reference engine: exit code, output, seconds.

    The benchmarks' runs: data and benchmark storage under ``tmp``, none of this run's cuzk
    options or faults leaking in, ``env`` added (e.g. ``CUZK_REF_FAULTS``), ``preexec_fn`` run in
    the child first (e.g. pinning it, and the daemons it starts, to some CPUs).
    """
    ours = ("PYTEST_CUZK_", "PYTEST_XDIST_", "CUZK_REF")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(ours)} | (env or {})
    cmd = [
        sys.executable, "-m", "pytest", "pytest_cuzk/suite/test_prove.py", *case, "-p", "no:cacheprovider",
        "--cuzk-daemon=ref", "--cuzk-batch-sizes=1", f"--cuzk-data-dir={tmp / 'data'}",
        f"--benchmark-storage=file://{tmp / 'benchmarks'}", "-rw", *args,
    ]  # fmt: skip
    t0 = time.monotonic()
    done = subprocess.run(
        cmd,
        cwd=SUITE.parents[1],
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        preexec_fn=preexec_fn,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - t0


# A neighbour whose load wanders: each quarter second it spins or sleeps, spinning with a
# probability that walks between 0.1 and 0.9 by up to 0.05 a second, so the host is faster in
# some minutes than in others, as a shared GPU host's vCPUs were measured to be. Like every
# neighbour it ends when its parent does: a benchmark killed mid-run leaves no load behind.
DRIFTING = """
import os, random, sys, time
rng, p, parent = random.Random(int(sys.argv[1])), 0.5, int(sys.argv[2])
while os.getppid() == parent:
    for _ in range(4):
        end = time.monotonic() + 0.25
        if rng.random() < p:
            while time.monotonic() < end:
                pass
        else:
            time.sleep(0.25)
    p = min(0.9, max(0.1, p + rng.uniform(-0.05, 0.05)))
"""


SPINNING = "import os, sys\nparent = int(sys.argv[2])\nwhile os.getppid() == parent: pass"


def neighbour(code: str, cpus: set[int], seed: int = 0) -> subprocess.Popen[bytes]:
    """A load pinned to ``cpus`` that ends with this process (the caller kills it sooner)."""
    argv = [sys.executable, "-c", code, str(seed), str(os.getpid())]
    return subprocess.Popen(argv, preexec_fn=partial(os.sched_setaffinity, 0, cpus))


def drifting_neighbours(cpus: Iterable[int]) -> list[subprocess.Popen[bytes]]:
    """The benchmarks' noisy host: a drifting neighbour pinned to each of ``cpus``."""
    return [neighbour(DRIFTING, {cpu}, seed=cpu) for cpu in sorted(cpus)]


def gate_verdict(code: int, out: str) -> str:
    """``passed``, or ``failed`` by a relative gate; any other end of a benchmark's run is an error."""
    if code == 0:
        return "passed"
    if code == 1 and "regressed" in out:
        return "failed"
    raise AssertionError(f"run neither passed nor failed a gate (exit {code}):\n{out[-3000:]}")


def log_line(out: io.StringIO | None = None) -> Any:
    """A progress line as a CI log shows it (no TTY), written to ``out`` (else nowhere)."""
    from pytest_cuzk.core.progress import ProgressLine

    sink = out if out is not None else io.StringIO()
    return ProgressLine(lambda: contextlib.nullcontext(sink), tty=False)


def timed_ensure(cache: str, manifest_path: str, deadline_s: float, barrier: Any, results: Any) -> None:
    """In a child process (an xdist worker's stand-in): ensure the porep file; put (seconds, outcome)."""
    from pytest_cuzk.core.errors import DataUnavailable
    from pytest_cuzk.data.manifest import load_manifest
    from pytest_cuzk.data.store import DataStore

    manifest = load_manifest(Path(manifest_path))
    store = DataStore(Path(cache), progress=log_line(), deadline_s=deadline_s)
    barrier.wait(timeout=60)
    started = time.monotonic()
    try:
        store.ensure(manifest.entries["porep"][0], manifest)
        results.put((time.monotonic() - started, "placed"))
    except DataUnavailable as exc:
        results.put((time.monotonic() - started, f"failed: {exc.reason}"))
