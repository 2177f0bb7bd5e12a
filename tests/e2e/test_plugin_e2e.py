"""The plugin end to end: inner pytest runs against a spawned reference engine."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest
from helpers.engine_support import tmpfs
from helpers.support import PROVE_SOURCE, SUITE, process_gone, ref_daemons

RECORD_DAEMON = """
import os
def test_records_daemon(cuzk_daemon, cuzk_client):
    assert cuzk_client.status().uptime_seconds >= 0
    with open(os.environ["DAEMON_FILE"], "a") as f:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "master")
        f.write(f"{worker} {cuzk_daemon.pid} {cuzk_daemon.address}\\n")
"""


def test_suite_case_proves_verifies_measures_and_reports(inner, tmp_path):
    out = tmp_path / "bench.json"
    plots = tmp_path / "plots"
    result = inner(
        {"test_prove": PROVE_SOURCE},
        "-k",
        "winning",
        "--cuzk-batch-sizes=1",
        f"--cuzk-plots={plots}",
        f"--benchmark-json={out}",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "cuzk: daemon mode ref (--cuzk-daemon=ref)",
            "*cuzk proving summary*",
            "test*kind*batch*j*ok*failed*",
            "test_prove[[]winning-batch1-j1[]]*winning*1*1*2*0*",
            "cold start [[]local batch 1[]]*",
        ]
    )
    daemon = re.search(r"^daemon \[local\]: (cuzk-ref .*)$", result.stdout.str(), re.M)
    assert daemon and re.search(r" prover=(cpu|gpu:\S.*) \(ref", daemon[1]), (
        "the summary names the prover that ran"
    )
    bench = json.loads(out.read_text())
    (case,) = bench["benchmarks"]
    assert case["name"] == "test_prove[winning-batch1-j1]"
    info = case["extra_info"]
    assert info["proofs_ok"] == 2 and info["proofs_failed"] == 0
    assert info["rss_peak_bytes"] > 10 * 2**20, "the daemon's RSS, not nothing"
    assert info["throughput_proofs_per_hour"] > 0
    assert info["timings"]["gpu_compute_ms"] > 0
    assert case["stats"]["rounds"] == 2, "one pedantic round per wave of one proof"
    assert bench["machine_info"]["cuzk"]["daemon"].startswith("cuzk-ref ")
    machine = bench["machine_info"]["cuzk"]["daemon"]
    assert daemon[1].startswith(f"{machine} prover="), "machine info: the build known before the daemon ran"
    assert (plots / "test_prove[winning-batch1-j1].png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_spawned_daemons_are_gone_after_the_session(inner, tmp_path, monkeypatch):
    record = tmp_path / "daemons.txt"
    monkeypatch.setenv("DAEMON_FILE", str(record))
    inner({"test_daemon": RECORD_DAEMON}).assert_outcomes(passed=1)
    (line,) = record.read_text().splitlines()
    pid = int(line.split()[1])
    assert process_gone(pid), f"daemon {pid} outlived the session"


def test_xdist_gives_each_worker_its_own_daemon(inner, tmp_path, monkeypatch):
    record = tmp_path / "daemons.txt"
    monkeypatch.setenv("DAEMON_FILE", str(record))
    files = {"test_a": RECORD_DAEMON, "test_b": RECORD_DAEMON.replace("test_records", "test_also_records")}
    inner(files, "-n", "2", "--dist", "loadfile").assert_outcomes(passed=2)
    rows = [line.split() for line in record.read_text().splitlines()]
    assert {r[0] for r in rows} == {"gw0", "gw1"}
    assert len({r[2] for r in rows}) == 2, "distinct sockets per worker"
    assert all(process_gone(int(r[1])) for r in rows)


def test_attached_daemon_is_used_sampled_and_left_running(inner, tmp_path, ref_params):
    out = tmp_path / "bench.json"
    with ref_daemons(tmp_path, ref_params) as refs:
        result = inner(
            {"test_prove": PROVE_SOURCE},
            f"--cuzk-daemon={refs.addresses[0]}",
            f"--cuzk-param-cache={refs.params}",
            f"--cuzk-manifest={refs.manifest}",
            f"--benchmark-json={out}",
            "-k",
            "winning",
        )
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["cuzk: daemon mode attach*", "*test_prove[[]winning-batch1-j1[]]*"])
        assert refs.all_running(), "an attached daemon is never stopped"
    (case,) = json.loads(out.read_text())["benchmarks"]
    info = case["extra_info"]
    assert info["rss_peak_bytes"] > 10 * 2**20, "found by its socket's owner and sampled as a spawned one"
    assert "rss_peak_bytes" not in info["na_reasons"]


def test_an_unreachable_address_is_one_usage_error_within_the_timeout_naming_it(inner):
    start = time.monotonic()
    result = inner(
        {"test_prove": PROVE_SOURCE},
        "--cuzk-daemon=127.0.0.1:9",
        "--cuzk-start-timeout=2",
        "-k",
        "winning or wpost",
    )
    assert time.monotonic() - start < 60
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: GetStatus (wait_ready) on 127.0.0.1:9 *no answer within 2 s*"])
    assert "out of service" not in result.stdout.str() + result.stderr.str()


def test_lowmem_warmup_restarts_with_the_full_config(inner, tmp_path, shared_cache):
    cache = tmp_path / "params"
    cache.mkdir()
    for f in (shared_cache / "ref-params-default").glob("*"):
        if not f.name.startswith("pce-"):
            os.link(f, cache / f.name)
    result = inner(
        {"test_prove": PROVE_SOURCE},
        "-k",
        "winning",
        "--cuzk-lowmem-warmup=on",
        f"--cuzk-param-cache={cache}",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*(low-memory warm-up)*", "*warmed up with a low-memory config, then restarted*"]
    )
    assert (cache / "pce-winning-post.bin").exists()


def test_xdist_workers_with_a_fresh_cache_share_setup_and_proofs_verify(inner, tmp_path):
    args = (
        "-n",
        "2",
        "--dist",
        "loadfile",
        "-k",
        "winning or wpost",
        f"--cuzk-data-dir={tmp_path / 'fresh'}",
    )
    inner({"test_a": PROVE_SOURCE, "test_b": PROVE_SOURCE}, *args).assert_outcomes(passed=4)


def test_one_attached_daemon_is_not_shared_between_xdist_workers(inner, tmp_path, ref_params):
    with ref_daemons(tmp_path, ref_params) as refs:
        result = inner(
            {"test_daemon": (SUITE / "test_daemon.py").read_text()},
            "-n",
            "2",
            f"--cuzk-daemon={refs.addresses[0]}",
            f"--cuzk-manifest={refs.manifest}",
            "-k",
            "counters and (winning or wpost)",
        )
    result.assert_outcomes(passed=2)


def test_a_failed_gate_shows_its_reason_first_and_the_daemon_log_only_under_v(inner):
    gate = ("-k", "winning", "--cuzk-batch-sizes=1", "--cuzk-min-throughput=winning:1000000000/h")
    quiet = inner({"test_prove": PROVE_SOURCE}, *gate)
    quiet.assert_outcomes(failed=1)
    out = quiet.stdout.str()
    reason = out.index("is below the minimum 1e+09/h for winning (--cuzk-min-throughput)")
    section = out.index("cuzk daemon log")
    assert reason < section, "the reason comes first"
    pointer = "kept in *daemon.log (-v shows its last lines here)"
    quiet.stdout.fnmatch_lines(["*cuzk daemon log*", pointer, "=*"])
    loud = inner({"test_prove": PROVE_SOURCE}, *gate, "-v")
    loud.assert_outcomes(failed=1)
    lines = loud.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.startswith("kept in ") and "daemon.log" in line)
    assert "-v shows" not in lines[start]
    shown = not lines[start + 1].startswith("=")
    assert shown or lines[start].endswith("(nothing logged during this test)"), "-v shows the log's tail"


def test_an_attached_daemon_stopped_mid_call_is_named_hung_and_left_to_its_owner(inner, tmp_path, ref_params):
    stop = '[ref.faults]\nstop_on_rpc = "SubmitProof"\n'
    with ref_daemons(tmp_path, ref_params, config=stop) as refs:
        start = time.monotonic()
        try:
            result = inner(
                {"test_prove": PROVE_SOURCE},
                f"--cuzk-daemon={refs.addresses[0]}",
                f"--cuzk-param-cache={refs.params}",
                f"--cuzk-manifest={refs.manifest}",
                "--cuzk-proof-timeout=120",
                "-k",
                "winning or wpost",
            )
            took = time.monotonic() - start
            assert refs.all_running(), "an attached daemon is never killed, stopped or not"
        finally:
            for proc in refs.procs:
                os.kill(proc.pid, signal.SIGCONT)  # let it take the SIGTERM that ends it
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*daemon hung: process state stopped (SIGSTOP?) during *",
            "*is out of service: daemon hung: process state stopped (SIGSTOP?)*",
        ]
    )
    assert "daemon died" not in result.stdout.str(), "a stopped daemon is not a dead one"
    assert took < 60, "found within a poll, not at the 120 s proof timeout"


@pytest.mark.parametrize(
    ("read_only", "file", "said"),
    [
        (True, "ref-data-default.lock", "Read-only file system; make it writable, or pass --cuzk-data-dir"),
        (False, "ref-data-default/c1.json", "No space left on device; free space on that disk, or pass"),
    ],
)
def test_a_data_dir_that_cannot_be_written_is_one_clear_error_and_leaves_nothing_partial(
    inner, tmp_path, read_only, file, said
):
    with tmpfs(tmp_path / "data", size="8k", read_only=read_only) as data:  # c1.json is 16 kB
        result = inner({"test_prove": PROVE_SOURCE}, "-k", "winning", f"--cuzk-data-dir={data}")
        left = sorted(str(p.relative_to(data)) for p in data.rglob("*"))
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert f"cannot write {data / file}: {said}" in out
    assert "Traceback" not in out and "OSError" not in out, out[-3000:]
    reason = f"  test_prove[[]winning-*]: cannot write {data}*"
    result.stdout.fnmatch_lines(["DID NOT RUN: 1 cuzk test", reason])
    assert left == ([] if read_only else ["ref-data-default", "ref-data-default.lock"]), left


REPORTS_PRESET = """
import os
def test_preset(cuzk_daemon, cuzk_client):
    info = next(line for line in cuzk_client.metrics().splitlines() if line.startswith("cuzk_ref_info"))
    with open(os.environ["PRESET_FILE"], "w") as f:
        f.write(info)
"""


def test_the_configs_preset_is_used_when_no_preset_option_is_given(inner, tmp_path, monkeypatch):
    config = tmp_path / "base.toml"
    config.write_text('[ref]\npreset = "medium"\n\n[gpus]\ndevices = []\n')  # the CPU prover on any host
    monkeypatch.setenv("PRESET_FILE", str(tmp_path / "preset"))
    result = inner({"test_preset": REPORTS_PRESET}, f"--cuzk-config={config}")
    result.assert_outcomes(passed=1)
    assert 'preset="medium"' in (tmp_path / "preset").read_text(), "the daemon runs the config's preset"
    # the spawned engine's identity names the prover it chose, asked once it answered
    result.stdout.fnmatch_lines(["*cuzk-ref * preset=medium * prover=cpu*"])
