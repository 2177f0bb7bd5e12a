"""The main job rehearsed at real cuzk speed, and at cuzk-ref's own: wall time, the estimate, intervals.

At real speed a cuzk-ref is started as a service would be, with ``[ref.faults] real_speed = "32g"``
(PoRep proofs of 60 to 90 s, ten partitions each, a PCE extraction after the start) and its
``/status`` on a loopback port; ``pytest --cuzk-daemon=auto -k porep`` attaches to it (its
``--cuzk-addr``) and reads the per-partition times (``--cuzk-status``). Printed: the wall time
after the daemon was ready (goal: at most 15 minutes), the estimate said after the warm-up
against it (goal: within 20%), the summary's rows and what each interval is over. Then the same
command with nothing to attach to, on cuzk-ref spawned at its own speed (goal: no slower than
the 47 to 90 s it took before). ``CUZK_REHEARSAL_SCALE`` scales real speed (0.1: proofs of 6 to
9 s, a rehearsal in under two minutes). About 17 minutes in all at scale 1. Run:
``pytest tests/benchmarks/test_realspeed_rehearsal.py --figures -s``.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.support import ref_daemons

from pytest_cuzk.refengine.config import default_param_cache

SCALE = float(os.environ.get("CUZK_REHEARSAL_SCALE", "1"))
GOAL_S = 15 * 60
_ESTIMATE = re.compile(r"the run will take [^(]+\((\d+) s\)")
_SHOWN = re.compile(
    r"^(test_prove\[|test_\w+\[.*: \d+ proofs?|  95% intervals|cuzk: a proof takes|cuzk:   |cuzk: porep)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pytest(cwd: Path, *args: str) -> tuple[list[tuple[float, str]], float]:
    """The run's lines, each with the moment it came, and its end; the host's load said first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_CUZK_", "PYTEST_XDIST"))}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--cuzk-daemon=auto",
        "-k",
        "porep",
        "-p",
        "no:cacheprovider",
        *args,
    ]
    print(f"\n$ {' '.join(cmd[1:])}   (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    with subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # the progress lines as they come: a rehearsal runs for minutes
            lines.append((time.monotonic(), line.rstrip("\n")))
            if line.startswith("cuzk: "):
                print(f"  {lines[-1][0] - lines[0][0]:5.0f} s  {line}", end="", flush=True)
    return lines, time.monotonic()


def _report(name: str, lines: list[tuple[float, str]], end: float) -> float:
    """Print the run's figures; returns the wall time after the daemon was ready."""
    ready = next((t for t, line in lines if line.startswith("cuzk: a proof takes")), lines[0][0])
    estimates = [int(m[1]) for _, line in lines if (m := _ESTIMATE.search(line))]
    after = end - ready
    print(f"[{name}] wall time after the daemon was ready: {after:.0f} s (goal: at most {GOAL_S} s)")
    if estimates:
        off = (estimates[0] - after) / after * 100
        said = f"estimate after the warm-up: {estimates[0]} s, {off:+.0f}% off the real total (goal: 20%)"
        print(f"[{name}] {said}")
    for _, line in lines:
        if _SHOWN.match(line) or line.startswith(("=", "cold start")):
            print(f"[{name}] {line}")
    return after


@pytest.mark.timeout(3 * GOAL_S)
def test_the_main_job_at_real_speed_and_at_cuzk_refs_own(tmp_path: Path) -> None:
    port = _free_port()
    config = (
        f'[daemon]\nstatus_listen = "127.0.0.1:{port}"\n'
        f'[ref.faults]\nreal_speed = "32g"\nreal_speed_scale = {SCALE}\n'
    )
    params = default_param_cache("default")
    params.mkdir(parents=True, exist_ok=True)
    with ref_daemons(tmp_path, params, config=config) as ref:
        real = tmp_path / "real"
        real.mkdir()
        args = (f"--cuzk-addr={ref.addresses[0]}", f"--cuzk-manifest={ref.manifest}")
        lines, end = _pytest(real, *args, f"--cuzk-status=127.0.0.1:{port}")
        assert ref.all_running()
    real_after = _report(f"real speed x{SCALE:g}", lines, end)
    own = tmp_path / "own"
    own.mkdir()
    lines, end = _pytest(own, f"--cuzk-addr=127.0.0.1:{_free_port()}")  # nothing there: cuzk-ref spawned
    _report("cuzk-ref's own speed", lines, end)
    print(f"[whole run at cuzk-ref's own speed] {end - lines[0][0]:.0f} s (before: 47 to 90 s on 2 cores)")
    assert real_after <= 2 * GOAL_S * max(SCALE, 0.1), "a real-speed run far past its budget"
