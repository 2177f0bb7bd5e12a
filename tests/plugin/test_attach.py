"""Attaching: a refused address fails within seconds; one that answers, but not as cuzk.v1, at once.

A local daemon's process is found by its socket, so it is sampled; a remote one says why not.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from helpers.support import PROVE_SOURCE

from pytest_cuzk.backends.owner import socket_owner

# Imported before the in-process runs: requests imported inside one would not match itself after it.
from pytest_cuzk.daemon import statuspoll  # noqa: F401
from pytest_cuzk.vocab.addresses import parse_address

# importlib mode: the inner test_prove must not collide with the suite module of the same name
WINNING = (
    "-k",
    "winning or wpost",
    "--cuzk-batch-sizes=1",
    "--cuzk-concurrency=1",
    "-p",
    "no:cacheprovider",
    "--import-mode=importlib",
    ".",  # these files, not the packaged suite a bare --cuzk-daemon runs
)


@pytest.fixture
def http_port() -> Iterator[int]:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield server.server_address[1]
        server.shutdown()


@pytest.fixture
def bare_grpc_port() -> Iterator[int]:
    """A gRPC server with no services at all: every call is UNIMPLEMENTED."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(0)


def _one_usage_error(result: pytest.RunResult, cause: str) -> None:
    """The run stopped before collecting, on one line that names the cause: no per-test errors, no traces."""
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    result.stderr.fnmatch_lines([f"ERROR: {cause}"])
    assert out.count(cause.strip("*").split("*")[0]) == 1, out
    for noise in ("collected", "_InactiveRpcError", "Traceback", "DID NOT RUN", "out of service"):
        assert noise not in out, out


def test_a_refused_address_is_one_usage_error_naming_it(pytester):
    pytester.makepyfile(test_prove=PROVE_SOURCE)
    start = time.monotonic()
    result = pytester.runpytest("--cuzk-daemon=127.0.0.1:9", *WINNING)
    assert time.monotonic() - start < 12, "dialed once, within the grace"
    _one_usage_error(
        result, "GetStatus (wait_ready) on 127.0.0.1:9 failed with UNAVAILABLE: no answer within 5 s*"
    )


@pytest.mark.parametrize(
    ("server", "seen"), [("http_port", "Failed parsing HTTP/2"), ("bare_grpc_port", "Method not found")]
)
def test_an_address_that_answers_but_not_as_cuzk_is_one_usage_error(pytester, request, server, seen):
    port = request.getfixturevalue(server)
    pytester.makepyfile(test_prove=PROVE_SOURCE)
    start = time.monotonic()
    result = pytester.runpytest(f"--cuzk-daemon=127.0.0.1:{port}", *WINNING)
    assert time.monotonic() - start < 3
    _one_usage_error(result, f"127.0.0.1:{port} answers, but not as a cuzk.v1 gRPC server (*{seen}*)*")


# A process that listens (on a unix socket path or a free TCP port), prints "ready PORT" and waits.
LISTENER = """
import socket, sys
where = sys.argv[1]
if where == "tcp":
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
else:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(where)
sock.listen()
print("ready", sock.getsockname()[1] if where == "tcp" else 0, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def listener(tmp_path):
    started = []

    def start(where: str) -> tuple[subprocess.Popen[str], int]:
        proc = subprocess.Popen(
            [sys.executable, "-c", LISTENER, where], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        started.append(proc)
        assert proc.stdout is not None
        word, port = proc.stdout.readline().split()
        assert word == "ready"
        return proc, int(port)

    yield start
    for proc in started:
        proc.communicate(timeout=10)


def test_an_attached_daemons_process_is_found_by_its_socket(listener, tmp_path):
    path = tmp_path / "cuzk.sock"
    unix, _ = listener(str(path))
    assert socket_owner(parse_address(f"unix://{path}")) == (unix.pid, "")
    tcp, port = listener("tcp")
    assert socket_owner(parse_address(f"127.0.0.1:{port}")) == (tcp.pid, "")
    pid, why = socket_owner(parse_address(f"unix://{tmp_path / 'none.sock'}"))
    assert pid is None and why.startswith(f"cannot ask {tmp_path / 'none.sock'} for its owner: ")


@pytest.mark.parametrize(
    ("peer", "said"),
    [
        ("http_port", "answers, but not as a cuzk.v1 gRPC server (*Failed parsing HTTP/2*)"),
        ("bare_grpc_port", "answers, but not as a cuzk.v1 gRPC server (*Method not found*)"),
        ("silent", "accepts connections but its GetStatus got no answer (*); a hung daemon looks like this*"),
    ],
)
def test_auto_fails_on_an_address_that_answers_not_as_cuzk_instead_of_falling_back(
    pytester, request, listener, peer, said
):
    """A web server, another gRPC service or a hung daemon at --cuzk-addr: testing cuzk-ref would go green."""
    port = listener("tcp")[1] if peer == "silent" else request.getfixturevalue(peer)
    pytester.makepyfile(test_prove=PROVE_SOURCE)
    start = time.monotonic()
    # The probe's GetStatus waits at most the proof timeout: the silent address is given up in 1 s, not 5.
    auto = ("--cuzk-daemon=auto", f"--cuzk-addr=127.0.0.1:{port}", "--cuzk-proof-timeout=1")
    result = pytester.runpytest(*auto, *WINNING)
    assert time.monotonic() - start < 30
    _one_usage_error(result, f"--cuzk-daemon=auto: *127.0.0.1:{port} {said}*not falling back*")
    assert "daemon mode ref" not in result.stdout.str()


def test_auto_falls_back_when_nothing_listens(pytester):
    from pytest_cuzk.backends.choice import choose
    from pytest_cuzk.backends.workspace import Workspace
    from pytest_cuzk.config.settings import resolve_settings

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        settings = resolve_settings(pytester.parseconfig(f"--cuzk-addr=127.0.0.1:{sock.getsockname()[1]}"))
        choice = choose(settings, Workspace())
    assert choice.mode in ("ref", "spawn") and choice.reason.startswith("no daemon at 127.0.0.1:")


def test_a_remote_daemons_own_memory_figures_come_from_its_status_page(fake_run, tmp_path):
    """A daemon whose process is not ours to sample: the summary says so and shows what /status says."""
    status = {"memory": {"total_bytes": 64 << 30, "used_bytes": 12 << 30, "available_bytes": 52 << 30}}
    body = json.dumps(status).encode()

    class Status(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    out = tmp_path / "bench.json"
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Status) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            result, _ = fake_run(
                {"test_prove": PROVE_SOURCE},
                *WINNING[:3],
                f"--cuzk-status=127.0.0.1:{server.server_address[1]}",
                f"--benchmark-json={out}",
                plugins=(),
            )
        finally:
            server.shutdown()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["RSS n/a: in-process fake daemon", "*the daemon's /status: memory budget used at peak 12.0 GiB"]
    )
    infos = [b["extra_info"] for b in json.loads(out.read_text())["benchmarks"]]
    assert {i["status_memory_peak_bytes"] for i in infos} == {12 << 30}
