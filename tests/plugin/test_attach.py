"""Attaching: a refused address fails within seconds; one that answers, but not as cuzk.v1, at once."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from support import PROVE_SOURCE

# importlib mode: the inner test_prove must not collide with the suite module of the same name
WINNING = (
    "-k",
    "winning or wpost",
    "--cuzk-batch-sizes=1",
    "-p",
    "no:cacheprovider",
    "--import-mode=importlib",
    ".",  # these files, not the packaged suite a bare --cuzk-daemon runs
)


@pytest.fixture
def http_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
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


def test_a_refused_address_fails_within_the_grace_naming_it(pytester):
    pytester.makepyfile(test_prove=PROVE_SOURCE)
    start = time.monotonic()
    result = pytester.runpytest("--cuzk-daemon=127.0.0.1:9", *WINNING)
    assert time.monotonic() - start < 12, "two tests, the second fails at once: the daemon is out of service"
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*GetStatus (wait_ready) on 127.0.0.1:9 failed with UNAVAILABLE: no answer within 5 s*",
            "*daemon 127.0.0.1-9 (127.0.0.1:9) is out of service: *",
        ]
    )


@pytest.mark.parametrize(
    ("server", "seen"), [("http_port", "Failed parsing HTTP/2"), ("bare_grpc_port", "Method not found")]
)
def test_an_address_that_answers_but_not_as_cuzk_fails_at_once(pytester, request, server, seen):
    port = request.getfixturevalue(server)
    pytester.makepyfile(test_prove=PROVE_SOURCE)
    start = time.monotonic()
    result = pytester.runpytest(f"--cuzk-daemon=127.0.0.1:{port}", *WINNING)
    assert time.monotonic() - start < 3
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([f"*127.0.0.1:{port} answers, but not as a cuzk.v1 gRPC server (*{seen}*)*"])
