"""``cuzk-ref`` as a process: config, readiness, signals, PCE reuse across restarts, fault injection."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import psutil
import pytest
from helpers.engine_support import (
    Daemon,
    RefData,
    connect,
    copy_params,
    rss_over_garbage_requests,
    write_config,
)

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.config import FAULTS_ENV, ConfigError, Faults, load_config, parse_size
from pytest_cuzk.refengine.verify import verify_proof
from pytest_cuzk.vocab.kinds import KINDS

Status = pb.AwaitProofResponse
CUZK_TOML = """
[daemon]
listen = "127.0.0.1:0"
future_key = "ignored like cuzk ignores it"
[srs]
param_cache = "{cache}"
[scheduler]
max_batch_size = 2
max_batch_wait_ms = 250
[pipeline]
enabled = false
[memory]
total_budget = "{budget}"
[gpus]
devices = [0, 1]
[ref]
seed = 7
[ref.faults]
hang_at_proof = 3
"""


@pytest.mark.parametrize(
    ("text", "size"),
    [("1GiB", 1 << 30), ("512MiB", 512 << 20), ("2GB", 2 * 10**9), ("5MB", 5 * 10**6), ("1234", 1234)],
)
def test_sizes_parse_like_cuzk(text: str, size: int) -> None:
    assert parse_size(text, "here") == size


def test_config_reads_cuzk_sections_ignores_unknown_keys_and_env_faults_win(tmp_path: Path) -> None:
    path = write_config(tmp_path / "cuzk.toml", CUZK_TOML.format(cache=tmp_path / "p", budget="64GiB"))
    config = load_config(path, env={FAULTS_ENV: json.dumps({"corrupt_at_proof": 2})})
    assert (config.listen, config.param_cache, config.max_batch_size, config.max_batch_wait_ms) == (
        "127.0.0.1:0",
        tmp_path / "p",
        2,
        250,
    )
    assert (config.pipeline_enabled, config.total_budget, config.gpu_devices, config.seed) == (
        False,
        64 << 30,
        (0, 1),
        7,
    )
    assert config.faults == Faults(hang_at_proof=3, corrupt_at_proof=2)
    assert config.behave == "cuzk"


def test_without_a_config_the_defaults_and_a_per_user_param_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = load_config(None, env={})
    assert (config.listen, config.behave) == ("unix:///run/curio/cuzk.sock", "cuzk")
    assert config.param_cache == tmp_path / "pytest-cuzk" / "ref-params-default"
    with pytest.raises(ConfigError, match=r"absent\.toml: config file not found"):
        load_config(tmp_path / "absent.toml", env={})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[scheduler]\nmax_batch_size = 'two'", "scheduler.max_batch_size must be int, got str 'two'"),
        ("[pipeline]\nenabled = 1", "pipeline.enabled must be bool, got int 1"),
        ("[memory]\ntotal_budget = 'lots'", "memory.total_budget: use a number with B, MB, MiB, GB or GiB"),
        ("[ref.faults]\nexplode = 1", "unknown fault 'explode'"),
        ("[ref.faults]\nfifo = 1", "fifo must be bool, got int 1"),
        ("[ref.faults]\nslow_factor = 0.5", "slow_factor must be at least 1, got 0.5"),
        ("[ref]\nbehave = 'rust'", "ref.behave must be one of cuzk, protocol, got 'rust'"),
        ("[daemon\n", "not valid TOML"),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write_config(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigError, match=str(path)) as info:
        load_config(path, env={})
    assert message in str(info.value)


def daemon_config(tmp_path: Path, cache: Path, extra: str = "", behave: str = "protocol") -> Path:
    """A config for a spawned daemon on a free 127.0.0.1 port (its ready line names the port)."""
    text = f'[daemon]\nlisten = "127.0.0.1:0"\n[srs]\nparam_cache = "{cache}"\n[ref]\nbehave = "{behave}"\n'
    return write_config(tmp_path / "cuzk.toml", text + extra)


def wait_for_line(daemon: Daemon, text: str, timeout: float = 10.0) -> None:
    """Wait until the daemon has printed ``text``."""
    deadline = time.monotonic() + timeout
    while text not in daemon.output:
        assert time.monotonic() < deadline, f"no {text!r} in:\n{daemon.output}"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_protocol_ready_line_comes_after_the_bind_and_signals_stop_cleanly(
    sig: signal.Signals, spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path, ref_data: RefData
) -> None:
    daemon = spawn("-c", str(daemon_config(tmp_path, ref_params)), "--log-level", "debug")
    address = daemon.wait_ready()
    channel, stub = connect(address)
    with channel:
        assert stub.GetStatus(pb.GetStatusRequest(), timeout=2).uptime_seconds >= 0  # no retry: already bound
        for _ in range(4):  # at most two run (one proving, one synthesised): the rest are queued
            stub.SubmitProof(ref_data.request("porep"))
        t0 = time.monotonic()
        assert daemon.stop(sig) == 0
    assert time.monotonic() - t0 < 3, daemon.output
    assert f"received {sig.name}, shutting down" in daemon.output
    cancelled = re.search(r"cancelling (\d+) queued job\(s\) at shutdown", daemon.output)
    assert cancelled and int(cancelled[1]) >= 2, daemon.output


def test_unix_listen_flag_overrides_the_config(
    spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path, socket_dir: Path
) -> None:
    path = socket_dir / "cuzk.sock"
    daemon = spawn("-c", str(daemon_config(tmp_path, ref_params)), "-l", f"unix://{path}")
    assert daemon.wait_ready() == f"unix://{path}"
    channel, stub = connect(f"unix://{path}")
    with channel:
        assert len(stub.GetStatus(pb.GetStatusRequest(), timeout=2).queues) == 4
    assert daemon.stop() == 0


def test_cuzk_sigint_stops_the_workers_not_the_server_and_sigterm_kills(
    spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path, ref_data: RefData, socket_dir: Path
) -> None:
    path = socket_dir / "cuzk.sock"
    daemon = spawn("-c", str(daemon_config(tmp_path, ref_params, behave="cuzk")), "-l", f"unix://{path}")
    assert daemon.wait_ready() == f"unix://{path}"
    channel, stub = connect(f"unix://{path}")
    with channel:
        assert stub.GetStatus(pb.GetStatusRequest(), timeout=2).uptime_seconds >= 0
        daemon.proc.send_signal(signal.SIGINT)
        wait_for_line(daemon, "engine workers stopped")
        daemon.proc.send_signal(signal.SIGINT)  # ignored, as cuzk ignores later ones
        job = stub.SubmitProof(ref_data.request("winning", request_id="after-sigint"), timeout=5).job_id
        with pytest.raises(grpc.RpcError) as info:  # accepted, never proved
            stub.AwaitProof(pb.AwaitProofRequest(job_id=job), timeout=2)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert stub.GetStatus(pb.GetStatusRequest(), timeout=2).total_proofs_completed == 0
    assert daemon.proc.poll() is None, "SIGINT must not stop a daemon behaving as cuzk"
    assert daemon.stop(signal.SIGTERM) == -signal.SIGTERM
    assert daemon.output.count("received SIGINT, shutting down") == 1


def test_cuzk_ready_line_comes_before_the_bind(
    spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        daemon = spawn("-c", str(daemon_config(tmp_path, ref_params, behave="cuzk")), "-l", listen)
        assert daemon.wait_exit() == 1  # the port is taken: the bind fails after the ready line
    ready = daemon.output.index(f"cuzk-ref ready, serving on {listen}")
    assert ready < daemon.output.index(f"Error: cannot listen on {listen}"), daemon.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-l", "localhost:9820"], "invalid listen address"),
        (["-c", "{bad}"], "pipeline.enabled must be bool"),
        (["-c", "{absent}"], "absent.toml: config file not found"),
        (["-c", "{cache_is_a_file}"], "is not a directory; set srs.param_cache to a directory"),
    ],
)
def test_startup_errors_exit_1_with_the_reason(
    args: list[str], message: str, spawn: Callable[..., Daemon], tmp_path: Path
) -> None:
    files = {
        "bad": write_config(tmp_path / "bad.toml", "[pipeline]\nenabled = 'yes'\n"),
        "absent": tmp_path / "absent.toml",
        "cache_is_a_file": daemon_config(tmp_path, write_config(tmp_path / "params", "")),
    }
    daemon = spawn(*[a.format(**files) for a in args])
    assert daemon.wait_exit() == 1
    assert message in daemon.output


@pytest.mark.parametrize("behave", ["protocol", "cuzk"])
def test_pce_written_by_one_daemon_is_used_by_the_next_unless_behaving_as_cuzk(
    behave: str,
    spawn: Callable[..., Daemon],
    tmp_path: Path,
    ref_params: Path,
    ref_data: RefData,
    socket_dir: Path,
) -> None:
    cache = tmp_path / "cache"
    copy_params(ref_params, cache, KINDS["wpost"].circuit_id)
    pce = cache / KINDS["wpost"].pce_file
    written = []
    for i, used in enumerate(("no", "yes" if behave == "protocol" else "no")):
        listen = "127.0.0.1:0" if behave == "protocol" else f"unix://{socket_dir / f'cuzk{i}.sock'}"
        daemon = spawn("-c", str(daemon_config(tmp_path, cache, behave=behave)), "-l", listen)
        channel, stub = connect(daemon.wait_ready())
        with channel:
            result = stub.Prove(pb.ProveRequest(submit=ref_data.request("wpost", request_id="w"))).result
        assert result.status == Status.COMPLETED, result.error_message
        if behave == "cuzk" or not written:
            wait_for_line(daemon, "PCE saved to disk")
        assert daemon.stop() in (0, -signal.SIGTERM)
        assert "job w synthesized (1 partition(s), PCE used: " + used + ")" in daemon.output
        written.append(pce.stat().st_mtime_ns)
    # protocol: the second daemon loaded the file; cuzk: it extracted and wrote it again
    assert (written[0] == written[1]) is (behave == "protocol")


def test_gen_data_writes_all_four_kinds_and_a_manifest(tmp_path: Path) -> None:
    out = tmp_path / "data"
    cmd = [sys.executable, "-m", "pytest_cuzk.refengine.cli", "gen-data", str(out), "--seed", "3"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    names = {p.name for p in out.iterdir()}
    assert {
        "manifest.toml",
        "c1.json",
        "snap-vanilla.json",
        "wpost-vanilla.json",
        "winning-vanilla.json",
    } <= names


def test_console_script_is_installed() -> None:
    script = shutil.which("cuzk-ref", path=str(Path(sys.executable).parent))
    assert script, "cuzk-ref is not installed next to this Python; run pip install -e ."
    reply = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60, check=True)
    assert "--listen" in reply.stdout and "gen-data" in reply.stdout


def fault_daemon(spawn: Callable[..., Daemon], tmp_path: Path, cache: Path, **faults: float) -> Daemon:
    """A daemon with faults set through the environment, as the plugin's tests set them."""
    return spawn("-c", str(daemon_config(tmp_path, cache)), env={FAULTS_ENV: json.dumps(faults)})


def test_exit_before_ready_and_start_delay(
    spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path
) -> None:
    assert fault_daemon(spawn, tmp_path, ref_params, exit_before_ready=3).wait_exit() == 3
    t0 = time.monotonic()
    slow = fault_daemon(spawn, tmp_path, ref_params, start_delay_s=1.0)
    slow.wait_ready()
    assert time.monotonic() - t0 >= 1.0
    assert slow.stop() == 0


def test_die_at_proof_kills_the_daemon_with_sigkill(
    spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path, ref_data: RefData
) -> None:
    daemon = fault_daemon(spawn, tmp_path, ref_params, die_at_proof=2)
    channel, stub = connect(daemon.wait_ready())
    with channel:
        assert (
            stub.Prove(pb.ProveRequest(submit=ref_data.request("winning"))).result.status == Status.COMPLETED
        )
        with pytest.raises(grpc.RpcError) as info:
            stub.Prove(pb.ProveRequest(submit=ref_data.request("winning")))
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert daemon.proc.wait(10) == -signal.SIGKILL


def test_hang_and_corrupt_at_proof(
    spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path, ref_data: RefData
) -> None:
    daemon = fault_daemon(spawn, tmp_path, ref_params, hang_at_proof=1, corrupt_at_proof=2)
    channel, stub = connect(daemon.wait_ready())
    with channel:
        hung = stub.SubmitProof(ref_data.request("winning")).job_id
        req = ref_data.request("winning")
        corrupt = stub.Prove(pb.ProveRequest(submit=req)).result
        assert corrupt.status == Status.COMPLETED
        assert not verify_proof(ref_params, KINDS["winning"], req, corrupt.proof)
        assert stub.AwaitProof(pb.AwaitProofRequest(job_id=hung, timeout_ms=200)).status == Status.TIMEOUT
        assert stub.CancelProof(pb.CancelProofRequest(job_id=hung)).was_running is True
    assert daemon.stop() == 0


def test_memory_growth_fault_grows_rss(
    spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path
) -> None:
    daemon = fault_daemon(spawn, tmp_path, ref_params, grow_memory_mib_per_s=100)
    daemon.wait_ready()
    process = psutil.Process(daemon.proc.pid)
    before = process.memory_info().rss
    time.sleep(1.0)
    grown = process.memory_info().rss - before
    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    assert grown > 50 << 20, f"RSS grew by {grown >> 20} MiB only"


def test_a_failed_requests_payload_is_dropped_at_once(
    spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path, ref_data: RefData
) -> None:
    """Eight 60 MB requests that fail parsing: the engine must not hold them for /status's 30 s.

    Receiving one costs its buffers (the allocator and gRPC's threads keep some, up to about two
    requests' worth); holding them would grow by each: 360 MiB over the last six.
    """
    daemon = spawn("-c", str(daemon_config(tmp_path, ref_params)))
    address = daemon.wait_ready()
    process = psutil.Process(daemon.proc.pid)
    channel, stub = connect(address)
    rss = []
    with channel:
        stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        rss += rss_over_garbage_requests(stub, ref_data, process.pid, count=8, size=60 << 20)
    assert daemon.stop() == 0
    grown = rss[-1] - rss[1]
    assert grown < 180 << 20, f"cuzk-ref grew by {grown >> 20} MiB over six more failed 60 MB requests"


WAIT = "at most 9223372036, got 1e\\+308, as the longest wait"
THREADS = r"at most \d+, got 1000000000, as (ulimit|the kernel)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[ref.faults]\nslow_factor = nan", "slow_factor must be a finite number, got nan"),
        ("[ref.faults]\nslow_factor = 1e308", f"slow_factor must be {WAIT}"),
        ("[ref.faults]\nstart_delay_s = 1e308", f"start_delay_s must be {WAIT}"),
        ("[ref.faults]\ngrow_memory_mib_per_s = 1e15", "grow_memory_mib_per_s must be at most .* as this"),
        ("[ref.faults]\nexit_before_ready = 256", "exit_before_ready must be 0 to 255, got 256"),
        (
            "[scheduler]\nmax_batch_size = 1000000000",
            r"max_batch_size must be at most \d+, got 1000000000, as this host .* for jobs of up to 128 MiB",
        ),
        ("[scheduler]\nmax_batch_wait_ms = 9223372036854775807", "max_batch_wait_ms must .*longest wait"),
        ("[synthesis]\nthreads = 1000000000", f"synthesis.threads must be {THREADS}"),
        ("[pipeline]\nsynthesis_concurrency = 1000000000", f"synthesis_concurrency must be {THREADS}"),
        ("[gpus]\ngpu_workers_per_device = 1000000000", f"gpu_workers_per_device must be {THREADS}"),
        ("[memory]\nsafety_margin = '99999TiB'", r"safety_margin must be at most .* GiB, got .*, as this"),
        ("[memory]\ntotal_budget = '99999999TiB'", "total_budget must be at most .*, as no 64-bit"),
    ],
)
def test_every_numeric_key_is_refused_above_what_the_host_can_hold(
    tmp_path: Path, text: str, message: str
) -> None:
    """A nan fault once did nothing, and 1e308 a warm-up that never ended: each key has the host's bound."""
    with pytest.raises(ConfigError, match=message):
        load_config(write_config(tmp_path / "cuzk.toml", text))
