"""Faults injected into the reference engine, and how the plugin reports them: precisely, fast, no orphans."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.support import PROVE_SOURCE, hears_like_a_terminal, not_an_xdist_worker, process_gone

WINNING = ("-k", "winning", "--cuzk-batch-sizes=1")

DIES_THEN_RESTARTS = """
import pytest

@pytest.mark.cuzk_kinds("winning")
def test_1_daemon_dies(cuzk_ready, cuzk_client, cuzk_data):
    for _ in range(3):
        cuzk_client.prove(cuzk_data.request("winning"), timeout_s=60)

@pytest.mark.cuzk_kinds("winning")
def test_2_gets_a_restarted_daemon(cuzk_ready, cuzk_client, cuzk_data):
    assert cuzk_client.prove(cuzk_data.request("winning"), timeout_s=60).completed
"""

PROVES_ONCE = """
import pytest

@pytest.mark.cuzk_kinds("winning")
def test_winning_proves_once(cuzk_ready, cuzk_client, cuzk_data):
    assert cuzk_client.prove(cuzk_data.request("winning"), timeout_s=60).completed
"""

RECORDS_PID = """
import os, time
def test_daemon(cuzk_daemon):
    with open(os.environ["DAEMON_FILE"], "w") as f:
        f.write(str(cuzk_daemon.pid))
    {body}
"""


def _faults(tmp_path, behave: str = "cuzk", **faults) -> str:
    config = tmp_path / "base.toml"
    values = "".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}\n" for k, v in faults.items())
    config.write_text(f'[ref]\nbehave = "{behave}"\n[ref.faults]\n{values}')
    return f"--cuzk-config={config}"


def _call_duration(result, name: str, when: str = "call") -> float:
    match = re.search(rf"([\d.]+)s {when}\s+\S*{re.escape(name)}", result.stdout.str())
    assert match, f"no duration for {name} in --durations output"
    return float(match.group(1))


def test_daemon_death_fails_the_test_within_two_seconds_with_signal_and_log(inner, tmp_path):
    # Proof 1 is the warm-up; the daemon kills itself while proving the case's first proof. The
    # kernel's oom_kill count did not move, so the OOM killer is not named (a real OOM kill: below).
    result = inner({"test_prove": PROVE_SOURCE}, *WINNING, _faults(tmp_path, die_at_proof=2), "--durations=0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*daemon died during winning proof job *: daemon (pid *) killed by SIGKILL; log *daemon.log",
            "*fault: killing the daemon with SIGKILL while proving proof 2*",
        ]
    )
    assert "OOM killer" not in result.stdout.str()
    # the case is in the summary table, marked failed, with the nothing it measured before
    result.stdout.fnmatch_lines(["test_prove[[]winning-batch1-j1[]] FAILED  winning  *1  *1  *0  *0  *"])
    assert _call_duration(result, "test_prove[winning-batch1-j1]") < 2.0


def test_later_tests_get_a_restarted_daemon_and_the_restart_is_reported(inner, tmp_path):
    result = inner({"test_dies": DIES_THEN_RESTARTS}, _faults(tmp_path, die_at_proof=3))
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*restarted after crash: daemon (pid *) killed by SIGKILL*"])


def test_a_hung_proof_times_out_is_cancelled_and_named(inner, tmp_path):
    start = time.monotonic()
    # The protocol behaviour: the case's other proof still succeeds, so the failure lists the hung one.
    faults = _faults(tmp_path, behave="protocol", hang_at_proof=2)
    result = inner({"test_prove": PROVE_SOURCE}, *WINNING, faults, "--cuzk-proof-timeout=3")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*winning proof pytest-cuzk-winning-* timed out after *s*"])
    assert time.monotonic() - start < 120


def test_a_corrupted_proof_names_the_partition_and_point(inner, tmp_path):
    result = inner({"test_prove": PROVE_SOURCE}, *WINNING, _faults(tmp_path, corrupt_at_proof=2))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*invalid proof structure: *partition 0*A*"])


def test_a_daemon_that_exits_before_ready_fails_with_its_code_and_log(inner, tmp_path):
    result = inner({"test_prove": PROVE_SOURCE}, *WINNING, _faults(tmp_path, exit_before_ready=7))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*exited with code 7*", "*fault: exiting with code 7 before ready*"])


def _did_not_run(result) -> list[str]:
    """The reasons listed under DID NOT RUN in the summary, one per test."""
    lines = result.stdout.str().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("DID NOT RUN"))
    return [line.split(": ", 1)[1] for line in lines[start + 1 :] if line.startswith("  test_")]


def test_the_did_not_run_reason_is_the_first_line_of_the_error(inner, tmp_path):
    result = inner({"test_prove": PROVE_SOURCE}, *WINNING, _faults(tmp_path, exit_before_ready=7))
    result.assert_outcomes(errors=1)
    (reason,) = _did_not_run(result)
    assert reason.startswith("daemon exited before it answered: daemon (pid "), reason
    assert "exited with code 7" in reason and reason.endswith("daemon.log"), reason


def test_a_config_the_reference_engine_rejects_is_a_usage_error_before_any_daemon_starts(inner, tmp_path):
    """Read with cuzk-ref's own parser at configure time: named, not a daemon that exits code 1."""
    result = inner({"test_prove": PROVE_SOURCE}, *WINNING, _faults(tmp_path, bogus_fault=1))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*base.toml: [[]ref.faults[]]*unknown fault 'bogus_fault'; known: *"])
    assert "daemon (pid" not in result.stdout.str() + result.stderr.str()


def test_a_daemon_that_starts_too_slowly_fails_at_the_start_timeout_with_its_log(inner, tmp_path):
    result = inner(
        {"test_prove": PROVE_SOURCE}, *WINNING, _faults(tmp_path, start_delay_s=30), "--cuzk-start-timeout=2"
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*did not answer within 2s*", "*fault: delaying start by 30.0 s*"])


@pytest.mark.parametrize("ending", ["normal", "failing", "ctrl-c", "pytest-timeout"])
def test_no_daemon_outlives_pytest(pytester, shared_cache, tmp_path, ending):
    record = tmp_path / "pid"
    body = {
        "normal": "pass",
        "failing": "assert False, 'planted failure'",
        "ctrl-c": "time.sleep(60)",
        "pytest-timeout": "time.sleep(60)",
    }[ending]
    pytester.makepyfile(test_pid=RECORDS_PID.format(body=body))
    args = [
        sys.executable,
        "-m",
        "pytest",
        ".",
        "--cuzk-daemon=ref",
        f"--cuzk-data-dir={shared_cache}",
        "-p",
        "no:cacheprovider",
    ]
    if ending == "pytest-timeout":
        args += ["--timeout=12", "--timeout-method=thread"]  # past the setup: a loaded host took 3 s
    env = {**os.environ, "DAEMON_FILE": str(record)}
    proc = subprocess.Popen(
        args, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    if ending == "ctrl-c":
        deadline = time.monotonic() + 60
        while not record.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0].decode()
    pid = int(record.read_text())
    for _ in range(50):
        if process_gone(pid):
            break
        time.sleep(0.1)
    assert process_gone(pid), f"daemon {pid} outlived pytest ({ending}):\n{out[-2000:]}"


SLEEPS_IN_A_TEST = """
import os, time
def test_1(cuzk_daemon):
    {first}

def test_2_waits(cuzk_daemon):
    with open(os.environ["DAEMON_FILE"], "w") as f:
        f.write(str(cuzk_daemon.pid))
    time.sleep(60)
"""


@pytest.mark.parametrize("first", ["passes", "fails"])
def test_sigterm_to_pytest_ends_the_run_as_ctrl_c_does(pytester, shared_cache, tmp_path, first):
    """The daemon is stopped, the private folders are removed (a failure's evidence kept), exit 2."""
    record, private = tmp_path / "pid", tmp_path / "tmp"
    private.mkdir()
    body = "pass" if first == "passes" else "assert False, 'planted failure'"
    pytester.makepyfile(test_term=SLEEPS_IN_A_TEST.format(first=body))
    args = [sys.executable, "-m", "pytest", ".", "--cuzk-daemon=ref", f"--cuzk-data-dir={shared_cache}",
            "-p", "no:cacheprovider"]  # fmt: skip
    env = {**os.environ, "DAEMON_FILE": str(record), "TMPDIR": str(private)}
    proc = subprocess.Popen(
        args, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 60
    while not record.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0].decode()
    pid = int(record.read_text())
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-2000:]
    assert "KeyboardInterrupt" in out
    for _ in range(50):
        if process_gone(pid):
            break
        time.sleep(0.1)
    assert process_gone(pid), f"daemon {pid} outlived pytest:\n{out[-2000:]}"
    left = [p.name for p in private.iterdir()]
    if first == "passes":
        assert left == [], f"private folders left behind: {left}"
    else:
        (kept,) = left
        assert f"daemon configs and logs kept in {private / kept} (a test failed)" in out
        assert list((private / kept).glob("*/daemon.log")), "the failure's evidence is kept"


INTERRUPTED_IN_A_CASE = """
import os, time
import pytest

@pytest.fixture(scope="session")
def slow_to_wind_down():
    yield
    time.sleep(3)  # the interrupt's wind-down lasts: the second signal lands in it

def test_case(slow_to_wind_down, cuzk_daemon, benchmark):
    with open(os.environ["DAEMON_FILE"], "w") as f:
        f.write(str(cuzk_daemon.pid))
    benchmark.pedantic(time.sleep, args=(0.2,), rounds=100)
"""


def _interrupt_twice(
    pytester, monkeypatch, shared_cache, private: Path, sig: int, *args: str
) -> tuple[int, str, int]:
    """Run a case, send ``sig`` twice 0.4 s apart while it measures; (exit code, output, daemon pid).

    The run is not an xdist worker (pytest-benchmark disables itself in one: one round, not 100,
    and the signals came after the case), and it hears the signals as a terminal's would.
    """
    not_an_xdist_worker(monkeypatch)
    record = private.parent / "pid"
    private.mkdir()
    pytester.makepyfile(test_interrupted=INTERRUPTED_IN_A_CASE)
    cmd = [sys.executable, "-m", "pytest", ".", "--cuzk-daemon=ref", f"--cuzk-data-dir={shared_cache}",
           "-p", "no:cacheprovider", *args]  # fmt: skip
    env = {**os.environ, "DAEMON_FILE": str(record), "TMPDIR": str(private)}
    proc = subprocess.Popen(
        cmd, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=hears_like_a_terminal(sig),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not record.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(sig)
    time.sleep(0.4)
    proc.send_signal(sig)
    out = proc.communicate(timeout=60)[0].decode()
    return proc.returncode, out, int(record.read_text())


def test_a_double_ctrl_c_saves_no_baseline_and_ends_in_the_interrupted_summary(
    pytester, monkeypatch, shared_cache, tmp_path
):
    storage = tmp_path / "benchmarks"
    code, out, pid = _interrupt_twice(
        pytester, monkeypatch, shared_cache, tmp_path / "tmp", signal.SIGINT, "--benchmark-autosave",
        f"--benchmark-storage={storage}",
    )  # fmt: skip
    assert code == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "Traceback (most recent call last)" not in out, out[-3000:]
    assert re.search(r"^!+ KeyboardInterrupt !+$", out, re.MULTILINE), out[-3000:]
    assert "interrupts.py" not in out, "the line the run was at is named, not the signal handler's"
    assert "cuzk: interrupted already" in out
    assert list(storage.rglob("*.json")) == [], "an interrupted run is no baseline"
    assert "Saved benchmark data" not in out
    for _ in range(50):
        if process_gone(pid):
            break
        time.sleep(0.1)
    assert process_gone(pid), f"daemon {pid} outlived pytest:\n{out[-2000:]}"


def test_a_double_sigterm_ends_at_once_and_leaves_no_private_folder(
    pytester, monkeypatch, shared_cache, tmp_path
):
    private = tmp_path / "tmp"
    code, out, pid = _interrupt_twice(pytester, monkeypatch, shared_cache, private, signal.SIGTERM)
    assert code == -signal.SIGTERM, out[-3000:]
    assert [p.name for p in private.iterdir()] == [], "the private folder is removed before the exit"
    for _ in range(50):
        if process_gone(pid):
            break
        time.sleep(0.1)
    assert process_gone(pid), f"daemon {pid} outlived pytest:\n{out[-2000:]}"


def test_a_daemon_killed_while_getting_ready_is_reported_as_a_death(inner, tmp_path):
    # Proof 1 is the warm-up: the seeds' hosts were OOM-killed there, during the PCE extraction.
    result = inner({"test_prove": PROVE_SOURCE}, *WINNING, _faults(tmp_path, die_at_proof=1))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*daemon died during the winning warm-up proof*: daemon (pid *) killed by SIGKILL*"]
    )


def test_a_daemon_that_keeps_failing_to_start_fails_each_test_and_is_given_up(inner, tmp_path):
    files = {"test_prove": PROVE_SOURCE}
    result = inner(
        files, "-k", "winning or wpost", "--cuzk-concurrency=1,2", _faults(tmp_path, exit_before_ready=7)
    )
    result.assert_outcomes(errors=4)
    out = result.stdout.str()
    assert "FileExistsError" not in out
    assert out.count("exited with code 7") >= 3
    result.stdout.fnmatch_lines(["*it died 3 times; not restarting it again*"])


def test_after_a_proof_timeout_the_next_test_gets_a_fresh_daemon(inner, tmp_path):
    # Warm-up is proof 1; the case's second proof (3) hangs and, behaving as cuzk, holds the prove
    # worker: only a restarted daemon proves the next test's proof. The fresh one proves 1 and 2.
    files = {"test_prove": PROVE_SOURCE, "test_zz_after": PROVES_ONCE}
    result = inner(files, *WINNING, _faults(tmp_path, hang_at_proof=3), "--cuzk-proof-timeout=3")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*restarted: a winning proof timed out in test_prove[[]winning-batch1-j1[]]*"]
    )


WRAPPER = """#!{python}
import os, sys
with open({procs!r}, "w") as f:
    f.write(str(os.getpid()))
os.execv(sys.executable, [sys.executable, "-m", "pytest_cuzk.refengine.cli", *sys.argv[1:]])
"""


@contextlib.contextmanager
def _memory_cgroup(limit_bytes: int):
    """A memory cgroup (v1 or v2) with a hard limit; yields its cgroup.procs path, or skips."""
    name = f"pytest-cuzk-oom-{os.getpid()}"
    for root, limit_file in (
        (Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
        (Path("/sys/fs/cgroup"), "memory.max"),
    ):
        group = root / name
        try:
            group.mkdir()
        except OSError:
            continue
        try:
            (group / limit_file).write_text(str(limit_bytes))
        except OSError:
            group.rmdir()
            continue
        try:
            yield group / "cgroup.procs"
        finally:
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
        return
    pytest.skip("no writable memory cgroup here (needs root and a memory controller)")


def test_a_real_oom_kill_mid_test_is_reported_with_the_kernels_count(inner, tmp_path, shared_cache):
    """The daemon grows memory inside a 400 MiB cgroup until the kernel's OOM killer kills it."""
    from pytest_cuzk.refengine.gendata import generate

    manifest = generate(tmp_path / "data")
    with _memory_cgroup(400 << 20) as procs:
        wrapper = tmp_path / "cuzk-daemon"
        wrapper.write_text(WRAPPER.format(python=sys.executable, procs=str(procs)))
        wrapper.chmod(0o755)
        result = inner(
            {"test_prove": PROVE_SOURCE},
            *WINNING,
            "--cuzk-daemon=spawn",
            f"--cuzk-binary={wrapper}",
            f"--cuzk-manifest={manifest}",
            f"--cuzk-param-cache={tmp_path / 'params'}",
            "--cuzk-lowmem-warmup=off",
            "--cuzk-proofs=1000",
            "--cuzk-max-proofs=1000",
            _faults(tmp_path, grow_memory_mib_per_s=40),
            timeout=240,
        )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*daemon died during winning proof job *: daemon (pid *) killed by SIGKILL "
            "(likely killed by the OOM "
            "killer: RSS peak * MiB, available memory *, oom_kill count *, up from *)*"
        ]
    )


STOPS_THE_DAEMON_MID_PROOF = """
import os, signal, threading, time
import pytest

@pytest.fixture(autouse=True)
def sigstop_mid_proof(request):
    if "wpost" in request.node.name:
        target = request.getfixturevalue("cuzk_target")
        with open(os.environ["STOPPED_AT"], "w") as f:
            f.write(f"{target.pid}")
        def stop():
            time.sleep(0.05)
            os.kill(target.pid, signal.SIGSTOP)
            with open(os.environ["STOPPED_AT"], "a") as f:
                f.write(f" {time.time()}")
        threading.Thread(target=stop, daemon=True).start()
    yield
"""


def test_a_sigstopped_daemon_is_named_hung_killed_and_replaced(inner, tmp_path, monkeypatch):
    stopped = tmp_path / "stopped"
    monkeypatch.setenv("STOPPED_AT", str(stopped))
    files = {"conftest": STOPS_THE_DAEMON_MID_PROOF, "test_prove": PROVE_SOURCE}
    result = inner(
        files, "-k", "wpost or winning", "--cuzk-batch-sizes=1", "--cuzk-proof-timeout=60", "--durations=0"
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "daemon hung: process state stopped (SIGSTOP?) during *",
            "*restarted: daemon hung: process state stopped (SIGSTOP?)*",
        ]
    )
    pid = int(stopped.read_text().split()[0])
    assert process_gone(pid), "the stopped daemon was killed, not left behind"
    assert _call_duration(result, "test_prove[wpost-batch1-j1]") < 2.0, (
        "detected within a poll, not the 60 s timeout"
    )


@pytest.mark.parametrize(
    ("rpc", "when", "outcome"),
    [
        ("Prove", "setup", {"errors": 1}),
        ("SubmitProof", "call", {"failed": 1}),
        ("AwaitProof", "call", {"failed": 1}),
    ],
)
def test_a_daemon_stopped_in_any_call_is_found_within_a_poll_and_killed(inner, tmp_path, rpc, when, outcome):
    # Prove is the warm-up's call; SubmitProof and AwaitProof the case's.
    faults = _faults(tmp_path, stop_on_rpc=f'"{rpc}"')
    result = inner({"test_prove": PROVE_SOURCE}, *WINNING, faults, "--cuzk-proof-timeout=60", "--durations=0")
    result.assert_outcomes(**outcome)
    result.stdout.fnmatch_lines(["*daemon hung: process state stopped (SIGSTOP?) during *"])
    assert _call_duration(result, "test_prove[winning-batch1-j1]", when) < 5.0, (
        "a poll, not the 60 s deadline"
    )
    kept = re.search(r"daemon configs and logs kept in (\S+)", result.stdout.str())
    assert kept, result.stdout.str()
    (log,) = Path(kept.group(1)).glob("*/daemon.log")
    pid = re.search(
        r"stopping the daemon \(pid (\d+)\) with SIGSTOP in /cuzk.v1.ProvingEngine/" + rpc, log.read_text()
    )
    assert pid, log.read_text()
    assert process_gone(int(pid.group(1))), "the stopped daemon was killed, not left behind"
