"""The ten faults from outside, each reproduced as it was found: none of them may come back.

Peers at the auto address, option values, real pytest runs on real cuzk-ref daemons
interrupted by real signals, passwords in URLs (the download servers' faults and their fuzzer
are in ``test_fault_bench_downloads.py``). Each case
prints one row (see ``faultbench.row``): the fault's number, the case, the outcome's first line,
the seconds it took to fail and what it left in the data cache, on disk and as processes. Run:
``pytest tests/benchmarks/test_fault_bench*.py --figures -s``.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import sys
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import psutil
import pytest
import tomli_w
from helpers.engine_support import RefData, connect, rss_over_garbage_requests, tmpfs, write_config
from helpers.faultbench import OLD, Run, files_in, row, run_pytest
from helpers.httpserver import FileServer
from helpers.support import PROVE_SOURCE, QUICK_PLAN, ref_daemons

from pytest_cuzk.backends.choice import choose
from pytest_cuzk.backends.reference import ref_preset
from pytest_cuzk.backends.workspace import Workspace
from pytest_cuzk.config.options import OPTIONS
from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.gendata import generate
from pytest_cuzk.vocab.redact import MASK

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def _configured(pytester: pytest.Pytester, arg: str) -> str:
    """What resolving the settings with ``arg`` gives: "accepted", or the usage error's text."""
    try:
        resolve_settings(pytester.parseconfig(arg))
    except pytest.UsageError as exc:
        return "usage error: " + str(exc)
    return "accepted"


@pytest.mark.parametrize("value", ["nan", "inf"])
@pytest.mark.parametrize("flag", [opt.flag for opt in OPTIONS if opt.kind == "float"])
def test_decimal_options_that_are_no_bound(pytester: pytest.Pytester, flag: str, value: str) -> None:
    started = time.monotonic()
    outcome = _configured(pytester, f"{flag}={value}")
    row(3, f"{flag}={value}", outcome, time.monotonic() - started, "nothing (refused at configure)")
    assert outcome.startswith("usage error")


class _Web(BaseHTTPRequestHandler):
    """A web server's handler that keeps its access log off the benchmark's output."""

    def log_message(self, format: str, *args: object) -> None:
        pass


def _silent() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_peers_at_the_auto_address(pytester: pytest.Pytester) -> None:
    http = ThreadingHTTPServer(("127.0.0.1", 0), _Web)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    bare = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    bare_port = bare.add_insecure_port("127.0.0.1:0")
    bare.start()
    silent = _silent()
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))
    peers = {
        "HTTP/1.1 server": http.server_address[1],
        "gRPC server of another service": bare_port,
        "accepts, never answers": silent.getsockname()[1],
        "nothing listens": refused.getsockname()[1],
    }
    try:
        for name, port in peers.items():
            settings = resolve_settings(pytester.parseconfig(f"--cuzk-addr=127.0.0.1:{port}"))
            started = time.monotonic()
            try:
                outcome = f"chose {choose(settings, Workspace()).mode}"
            except CuzkError as exc:
                outcome = "failed: " + str(exc)
            row(5, f"--cuzk-daemon=auto at {name}", outcome, time.monotonic() - started, "nothing")
            assert outcome.startswith("chose") == (name == "nothing listens")
    finally:
        http.shutdown()
        http.server_close()
        bare.stop(0)
        silent.close()
        refused.close()


def test_a_real_run_with_auto_at_a_web_server(pytester: pytest.Pytester) -> None:
    http = ThreadingHTTPServer(("127.0.0.1", 0), _Web)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        args = ["--cuzk-daemon=auto", f"--cuzk-addr=127.0.0.1:{http.server_address[1]}", "-k", "winning"]
        run = run_pytest(pytester.path, pytester.path / "private", args)
    finally:
        http.shutdown()
    said = run.line("not as a cuzk.v1 gRPC server")
    row(
        5,
        "a whole pytest run, auto at an HTTP server",
        f"exit {run.code}: {said.strip()}",
        run.took,
        run.left,
    )
    assert run.code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) and said


def test_a_reference_preset_in_the_config(pytester: pytest.Pytester, tmp_path: Path) -> None:
    config = write_config(tmp_path / "base.toml", '[ref]\npreset = "medium"\n')
    for extra in ((), ("--cuzk-preset=default",)):
        started = time.monotonic()
        try:
            outcome = "runs " + ref_preset(
                resolve_settings(pytester.parseconfig(f"--cuzk-config={config}", *extra))
            )
        except CuzkError as exc:
            outcome = "usage error: " + str(exc)
        case = '[ref] preset = "medium"' + (f" and {extra[0]}" if extra else " alone")
        row(10, case, outcome, time.monotonic() - started, "nothing (resolved at configure)")
        if extra:
            assert outcome.startswith("usage error") and extra[0] in outcome, outcome
        else:
            assert outcome == "runs medium", "the config's preset, not the option's default"


# --- real pytest runs on real cuzk-ref daemons ------------------------------------------------------
WINNING = ("-k", "winning", "--cuzk-batch-sizes=1")


def _faults(tmp_path: Path, **faults: object) -> str:
    values = "".join(f"{k} = {json.dumps(v)}\n" for k, v in faults.items())
    config = write_config(tmp_path / "base.toml", "[ref.faults]\n" + values)
    return f"--cuzk-config={config}"


def _suite_run(pytester: pytest.Pytester, cache: Path, *args: str) -> Run:
    pytester.makepyfile(test_prove=PROVE_SOURCE)
    argv = [".", "--cuzk-daemon=ref", f"--cuzk-data-dir={cache}", *QUICK_PLAN, *args]
    return run_pytest(pytester.path, pytester.path / "private", argv)


def test_a_daemon_sigkilled_part_way_through_a_case(pytester: pytest.Pytester, shared_cache: Path) -> None:
    run = _suite_run(pytester, shared_cache, *WINNING, _faults(pytester.path, die_at_proof=2))
    died = run.line("daemon died during winning proof job")
    row(10, "SIGKILL mid-case, the kernel's OOM count unmoved", died, run.took, run.left)
    summary = run.line("test_prove[winning-batch1-j1] FAILED")
    row(10, "a case that failed part-way, in the summary", summary or "missing", run.took, run.left)
    assert "killed by SIGKILL" in died and "OOM" not in run.out and summary


def test_a_daemon_that_exits_before_ready(pytester: pytest.Pytester, shared_cache: Path) -> None:
    run = _suite_run(pytester, shared_cache, *WINNING, _faults(pytester.path, exit_before_ready=7))
    lines = run.out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("DID NOT RUN"))
    listed: list[str] = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        listed.append(line)
    row(
        10,
        f"DID NOT RUN lists {len(listed)} line(s) for 1 test",
        listed[0] if listed else "",
        run.took,
        run.left,
    )
    assert len(listed) == 1 and listed[0].startswith("  test_prove[winning"), listed


HANGS = {
    "spawned daemon SIGSTOPped in its warm-up Prove": {"stop_on_rpc": "Prove"},
    "spawned daemon SIGSTOPped in SubmitProof": {"stop_on_rpc": "SubmitProof"},
    "spawned daemon whose proof never finishes (timeout 3 s)": {"hang_at_proof": 2},
}


@pytest.mark.parametrize("case", HANGS)
def test_a_hung_spawned_daemon_keeps_its_evidence(
    pytester: pytest.Pytester, shared_cache: Path, case: str
) -> None:
    faults = _faults(pytester.path, **HANGS[case])
    run = _suite_run(pytester, shared_cache, *WINNING, faults, "--cuzk-proof-timeout=3")
    kept = re.search(r"daemon configs and logs kept in (\S+)", run.out)
    evidence = sorted(p.name for p in Path(kept.group(1)).glob("*/*")) if kept else []
    said = run.line("daemon hung") or run.line("timed out after")
    row(9, case, said, run.took, f"{run.left} (kept: {', '.join(evidence) or 'nothing'})")
    assert said and "daemon.log" in evidence and any(name.endswith(".toml") for name in evidence), evidence
    assert "processes: none" in run.left


def test_an_attached_daemon_stopped_mid_call(pytester: pytest.Pytester, ref_params: Path) -> None:
    stop = '[ref.faults]\nstop_on_rpc = "SubmitProof"\n'
    with ref_daemons(pytester.path, ref_params, config=stop) as refs:
        try:
            pytester.makepyfile(test_prove=PROVE_SOURCE)
            args = [".", f"--cuzk-daemon={refs.addresses[0]}", f"--cuzk-param-cache={refs.params}",
                    f"--cuzk-manifest={refs.manifest}", "--cuzk-proof-timeout=120",
                    *QUICK_PLAN, *WINNING]  # fmt: skip
            run = run_pytest(pytester.path, pytester.path / "private", args)
            running = refs.all_running()
        finally:
            for proc in refs.procs:
                proc.send_signal(signal.SIGCONT)
    said = run.line("daemon hung") or run.line("daemon died")
    row(
        10,
        "attached daemon SIGSTOPped in SubmitProof",
        said,
        run.took,
        run.left + f"; attached left running: {running}",
    )
    assert "daemon hung" in said and "daemon died" not in run.out and running and run.took < 60


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "full"])
def test_a_data_dir_that_cannot_be_written(pytester: pytest.Pytester, read_only: bool) -> None:
    with tmpfs(pytester.path / "data", size="8k", read_only=read_only) as data:
        pytester.makepyfile(test_prove=PROVE_SOURCE)
        run = run_pytest(pytester.path, pytester.path / "private", [".", "--cuzk-daemon=ref",
                         f"--cuzk-data-dir={data}", *QUICK_PLAN, "-k", "winning"])  # fmt: skip
        cache = files_in(data)
    said = run.line("cannot write") or run.line("Error")
    row(10, f"{'read-only' if read_only else 'full'} data dir", said, run.took, f"cache: {cache}; {run.left}")
    assert said and "OSError" not in run.out and "Traceback" not in run.out


SLEEPS = """
import os, time
def test_1(cuzk_daemon):
    pass

def test_2_sleeps(cuzk_daemon):
    open(os.environ["SLEEPING"], "w").close()
    time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("when", ["mid-test", "while the daemon starts", "mid-test under xdist -n 2"])
def test_a_signal_to_pytest(pytester: pytest.Pytester, shared_cache: Path, sig: int, when: str) -> None:
    pytester.makepyfile(test_term=SLEEPS)
    sleeping, private = pytester.path / "sleeping", pytester.path / "private"
    args = [".", "--cuzk-daemon=ref", f"--cuzk-data-dir={shared_cache}"] + ["-n", "2"] * ("xdist" in when)
    if when.startswith("mid-test"):
        ready = sleeping.exists
    else:  # the daemon sleeps 30 s before it listens: signalled once its config is written
        args.append(_faults(pytester.path, start_delay_s=30))
        ready = lambda: any(private.glob("*/*/*.toml"))  # noqa: E731
    run = run_pytest(pytester.path, private, args, {"SLEEPING": str(sleeping)}, ready, sig)
    name = signal.Signals(sig).name
    row(
        10,
        f"{name} to pytest {when}",
        f"exit {run.code}: " + run.line("KeyboardInterrupt"),
        run.took,
        run.left,
    )
    assert run.code == pytest.ExitCode.INTERRUPTED and run.left == "disk: nothing; processes: none"


PROVES_THEN_SLEEPS = """
import os, time
def test_zz_sleeps():
    open(os.environ["SLEEPING"], "w").close()
    time.sleep(60)
"""


SAVES = {
    "Ctrl-C with --benchmark-autosave": (signal.SIGINT, ["--benchmark-autosave"]),
    "SIGTERM with --benchmark-autosave": (signal.SIGTERM, ["--benchmark-autosave"]),
    "Ctrl-C with --benchmark-save=mine": (signal.SIGINT, ["--benchmark-save=mine"]),
    "Ctrl-C with --benchmark-autosave under xdist -n 2": (signal.SIGINT, ["--benchmark-autosave", "-n", "2"]),
}


@pytest.mark.parametrize("case", SAVES)
def test_an_interrupted_run_that_would_be_saved(
    pytester: pytest.Pytester, shared_cache: Path, case: str
) -> None:
    sig, save = SAVES[case]
    pytester.makepyfile(test_prove=PROVE_SOURCE, test_zz=PROVES_THEN_SLEEPS)
    sleeping = pytester.path / "sleeping"
    args = [".", "--cuzk-daemon=ref", f"--cuzk-data-dir={shared_cache}", *QUICK_PLAN,
            "-k", "winning or sleeps", "--cuzk-batch-sizes=1", *save]  # fmt: skip
    run = run_pytest(
        pytester.path, pytester.path / "private", args, {"SLEEPING": str(sleeping)}, sleeping.exists, sig
    )
    saved = files_in(pytester.path / ".benchmarks")
    said = run.line("not saved as a baseline") or run.line("Saved benchmark") or f"exit {run.code}"
    row(6, case, said, run.took, f"saved: {saved}; {run.left}")
    assert run.code == pytest.ExitCode.INTERRUPTED and saved == "nothing"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Reference data for all kinds, once: the remote-file cases give one kind a URL in a manifest here."""
    data = tmp_path_factory.mktemp("generated")
    generate(data, preset="default", seed=0)
    return data


def _remote(data: Path, name: str, kind: str, url: str) -> Path:
    """A manifest beside the generated files whose ``kind`` is a file to download from ``url``."""
    manifest = tomllib.loads((data / "manifest.toml").read_text())
    manifest["kinds"][kind] = [{"file": f"{name}.json", "url": url}]
    (data / f"{name}.toml").write_text(tomli_w.dumps(manifest))
    return data / f"{name}.toml"


def test_download_deadlines_given_as_options(
    pytester: pytest.Pytester, shared_cache: Path, generated: Path
) -> None:
    with FileServer() as server:
        server.add("/winning.json", OLD)
        server.trickle_headers(1.0)
        manifest = _remote(generated, "trickled", "winning", server.url("/winning.json"))
        run = _suite_run(pytester, shared_cache, *WINNING, f"--cuzk-manifest={manifest}",
                         "--cuzk-download-timeout=3", "--cuzk-download-stall=2", "--durations=0")  # fmt: skip
        gets = server.count("/winning.json")
    setup = run.duration("test_prove[winning-batch1-j1]", "setup")
    said = run.line("was still sending") or run.line("winning.json")
    row(2, f"headers a byte a second, --cuzk-download-timeout=3 ({gets} GET)", said, setup, run.left)
    assert "after 3 s" in said and setup < 10, "the deadline holds over the whole setup, retries included"


PLANTED = "Pl4nted-s3cret"


@pytest.mark.parametrize("flag", ["--cuzk-daemon", "--cuzk-addr", "--cuzk-ab"])
def test_a_password_in_a_daemon_address(pytester: pytest.Pytester, flag: str) -> None:
    started = time.monotonic()
    outcome = _configured(pytester, f"{flag}=http://cuzk:{PLANTED}@127.0.0.1:1")
    row(4, f"password in {flag}=http://cuzk:PASSWORD@127.0.0.1:1", outcome, time.monotonic() - started,
        f"leaks: {'message' if PLANTED in outcome else 'none'}")  # fmt: skip
    assert outcome.startswith("usage error") and PLANTED not in outcome


def test_passwords_in_urls(pytester: pytest.Pytester, shared_cache: Path, generated: Path) -> None:
    pytest.importorskip("psycopg", reason="the postgresql:// DSN needs the psycopg driver to be tried")
    with FileServer() as server:
        remote = server.url(f"/wpost.json?token={PLANTED}").replace("http://", f"http://cuzk:{PLANTED}@")
        manifest = _remote(generated, "secret", "wpost", remote)
        outputs = [pytester.path / name for name in ("junit.xml", "report.html", "bench.json")]
        run = _suite_run(
            pytester, shared_cache, "-k", "winning or wpost", "--cuzk-batch-sizes=1", "-rA",
            f"--cuzk-manifest={manifest}",
            f"--cuzk-results-db=postgresql://cuzk:{PLANTED}@127.0.0.1:1/runs",
            f"--cuzk-status=http://cuzk:{PLANTED}@127.0.0.1:1/status?token={PLANTED}",
            f"--junitxml={outputs[0]}", f"--cuzk-html={outputs[1]}", f"--benchmark-json={outputs[2]}",
        )  # fmt: skip
    written = [p for p in pytester.path.rglob("*") if p.is_file()]
    leaks = [p.name for p in written if PLANTED.encode() in p.read_bytes()] + ["output"] * (
        PLANTED in run.out
    )
    said = run.line(f"cuzk:{MASK}@127.0.0.1:1/runs")
    row(4, "passwords in the results DB, status and manifest URLs", said, run.took,
        f"leaks: {', '.join(leaks) or 'none'}; {run.left}")  # fmt: skip
    assert set(outputs) <= set(written) and leaks == [] and said
    assert f"http://cuzk:{MASK}@127.0.0.1:" in run.out, "the manifest URL is named, masked"


def test_failed_requests_bodies_are_not_held(
    tmp_path: Path, spawn, ref_params: Path, ref_data: RefData
) -> None:
    text = (
        f'[daemon]\nlisten = "127.0.0.1:0"\n[srs]\nparam_cache = "{ref_params}"\n[ref]\nbehave = "protocol"\n'
    )
    daemon = spawn("-c", str(write_config(tmp_path / "cuzk.toml", text)))
    channel, stub = connect(daemon.wait_ready())
    process, rss = psutil.Process(daemon.proc.pid), []
    started = time.monotonic()
    with channel:
        stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        rss.append(process.memory_info().rss)
        rss += rss_over_garbage_requests(stub, ref_data, process.pid, count=6, size=100 << 20)
    took = time.monotonic() - started
    code = daemon.stop()
    mib = [r >> 20 for r in rss]
    row(
        8,
        "six 100 MB requests that fail parsing",
        f"RSS {' -> '.join(map(str, mib))} MiB",
        took,
        f"processes: none (exit {code})",
    )
    assert rss[-1] - rss[1] < 300 << 20, "held bodies would grow by 500 MiB over the last five"
