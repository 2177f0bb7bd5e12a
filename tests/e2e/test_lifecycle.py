"""Daemon lifecycle against real subprocesses: small throwaway daemons for the odd cases."""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from concurrent import futures
from pathlib import Path

import grpc
import psutil
import pytest

from pytest_cuzk.backends.choice import choose
from pytest_cuzk.backends.process import (
    DaemonProcess,
    OomCounter,
    daemon_config,
    describe_exit,
    listen_address,
    status_address,
)
from pytest_cuzk.backends.workspace import Workspace
from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.core.errors import CuzkError, DaemonExited
from pytest_cuzk.proto import pb, pb_grpc

EXITS_AT_ONCE = "import sys; print('bad config: no GPU', flush=True); sys.exit(3)"
NEVER_ANSWERS = "import time; print('starting', flush=True); time.sleep(600)"
IGNORES_SIGTERM_WITH_CHILD = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", stubborn])
print("child", child.pid, flush=True)
time.sleep(600)
"""


def _throwaway(tmp_path: Path, code: str) -> DaemonProcess:
    """A 'daemon' that runs ``code``; it accepts the ``-c CONFIG`` the plugin passes and ignores it."""
    script = tmp_path / "fake_daemon.py"
    script.write_text("import sys\nsys.argv[1:] = []\n" + code)
    config = daemon_config(None, {"daemon": {"listen": listen_address(tmp_path)}})
    return DaemonProcess([sys.executable, str(script)], tmp_path / "work", config)


def test_a_daemon_that_exits_fails_at_once_with_code_and_log(tmp_path):
    daemon = _throwaway(tmp_path, EXITS_AT_ONCE)
    daemon.start()
    start = time.monotonic()
    with pytest.raises(DaemonExited) as err:
        daemon.wait_answering(60, lambda: None)
    assert time.monotonic() - start < 10, "must not wait for the timeout when the process is gone"
    assert "exited with code 3" in str(err.value)
    assert "bad config: no GPU" in str(err.value)


def test_a_daemon_that_never_answers_fails_at_the_timeout_naming_the_address(tmp_path):
    daemon = _throwaway(tmp_path, NEVER_ANSWERS)
    daemon.start()
    try:
        with pytest.raises(DaemonExited) as err:
            daemon.wait_answering(1.0, lambda: None)
        assert daemon.address in str(err.value)
        assert "did not answer within 1s" in str(err.value)
        assert "starting" in str(err.value)
    finally:
        daemon.stop(grace_s=2)
    assert not daemon.alive()


def test_stop_kills_the_whole_group_even_when_sigterm_is_ignored(tmp_path):
    daemon = _throwaway(tmp_path, IGNORES_SIGTERM_WITH_CHILD)
    daemon.start()
    deadline = time.monotonic() + 10
    while "child" not in daemon.log_tail() and time.monotonic() < deadline:
        time.sleep(0.05)
    child_pid = int(daemon.log_tail().split()[1])
    assert psutil.pid_exists(child_pid)
    code = daemon.stop(grace_s=0.5)
    assert code == -signal.SIGKILL
    assert daemon.stop() == code, "stop is idempotent"
    for _ in range(50):
        if not psutil.pid_exists(child_pid) or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"child {child_pid} of the daemon outlived stop()")


def test_config_and_log_are_private_and_listen_only_where_the_plugin_says(tmp_path):
    base = tmp_path / "base.toml"
    base.write_text(
        '[daemon]\nlisten = "0.0.0.0:9820"\nstatus_listen = "0.0.0.0:9821"\n[srs]\nparam_cache = "/p"\n'
    )
    config = daemon_config(base, {"daemon": {"listen": "unix:///x.sock"}, "scheduler": {"max_batch_size": 2}})
    assert config["daemon"] == {"listen": "unix:///x.sock", "status_listen": ""}, "0.0.0.0 dropped"
    status = status_address()
    assert status.startswith("127.0.0.1:"), status
    given = daemon_config(base, {"daemon": {"listen": "unix:///x.sock", "status_listen": status}})
    assert given["daemon"]["status_listen"] == status, "only the plugin's loopback /status is kept"
    assert config["srs"]["param_cache"] == "/p", "the user's own keys are kept"
    assert config["scheduler"]["max_batch_size"] == 2
    daemon = _throwaway(tmp_path, EXITS_AT_ONCE)
    daemon.start()
    daemon.proc.wait(10)
    for path in (daemon.config_path, daemon.log_path):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


def test_unreadable_base_config_is_named(tmp_path):
    bad = tmp_path / "cuzk.toml"
    bad.write_text("[daemon\n")
    with pytest.raises(CuzkError, match=r"--cuzk-config .*cuzk\.toml"):
        daemon_config(bad, {})


def test_describe_exit_says_code_signal_and_oom_hint():
    assert describe_exit(1) == "exited with code 1"
    assert describe_exit(-signal.SIGTERM) == "killed by SIGTERM"
    assert describe_exit(-signal.SIGKILL, rss_peak=3 * 2**30) == "killed by SIGKILL"
    text = describe_exit(-signal.SIGKILL, ["oom_kill count 2, up from 1 (/proc/vmstat)"], 3 * 2**30)
    assert text.startswith("killed by SIGKILL (likely killed by the OOM killer: RSS peak 3.00 GiB, ")
    assert "available memory" in text and text.endswith("oom_kill count 2, up from 1 (/proc/vmstat))")


@pytest.mark.parametrize("oom_kills", [0, 1])
def test_a_sigkill_is_blamed_on_the_oom_killer_only_when_its_count_grew(tmp_path, oom_kills):
    events = tmp_path / "memory.events"  # in the format of a cgroup's memory.events
    events.write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    daemon = _throwaway(tmp_path, NEVER_ANSWERS)
    daemon.oom = OomCounter((events,))
    daemon.start()
    try:
        os.kill(daemon.pid, signal.SIGKILL)
        assert daemon.died_within(10)
        events.write_text(f"low 0\nhigh 0\nmax 4\noom 1\noom_kill {1 + oom_kills}\n")
        message = daemon.exit_message()
    finally:
        daemon.stop()
    first = message.splitlines()[0]
    if oom_kills:
        assert "killed by SIGKILL (likely killed by the OOM killer: available memory " in first
        assert f"oom_kill count 2, up from 1 ({events}))" in first
    else:
        assert "killed by SIGKILL; log " in first and "OOM" not in message


class _Status(pb_grpc.ProvingEngineServicer):
    def GetStatus(self, request, context):
        return pb.GetStatusResponse(uptime_seconds=5)


def _choose(pytester, *args):
    return choose(resolve_settings(pytester.parseconfig(*args)), Workspace())


def test_choose_attaches_spawns_or_falls_back_to_the_reference_engine(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")
    servers, ports = [], []
    for _ in range(2):
        servers.append(grpc.server(futures.ThreadPoolExecutor(max_workers=2)))
        pb_grpc.add_ProvingEngineServicer_to_server(_Status(), servers[-1])
        ports.append(servers[-1].add_insecure_port("127.0.0.1:0"))
        servers[-1].start()
    port = ports[0]
    addr = f"--cuzk-addr=127.0.0.1:{port}"
    try:
        choice = _choose(pytester, addr)
        assert (choice.mode, [b.address for b in choice.backends]) == ("attach", [f"127.0.0.1:{port}"])
        labels = [
            b.label
            for b in _choose(pytester, f"--cuzk-daemon=127.0.0.1:{port},127.0.0.1:{ports[1]}").backends
        ]
        assert labels == [f"127.0.0.1-{port}", f"127.0.0.1-{ports[1]}"]
    finally:
        for server in servers:
            server.stop(0)
    binary = tmp_path / "cuzk-daemon"
    assert _choose(pytester, addr, f"--cuzk-binary={binary}").mode == "spawn"
    fallback = _choose(pytester, addr)
    assert fallback.mode == "ref" and "reference engine" in fallback.reason
    assert _choose(pytester, "--cuzk-daemon=ref", f"--cuzk-binary={binary}").mode == "ref"
    with pytest.raises(CuzkError, match=r"GetStatus .* on 127\.0\.0\.1:1 failed"):  # dialed as it is chosen
        _choose(pytester, "--cuzk-daemon=127.0.0.1:1")


def test_spawn_without_a_binary_says_what_to_do(pytester, monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(CuzkError, match="--cuzk-binary"):
        _choose(pytester, "--cuzk-daemon=spawn")
