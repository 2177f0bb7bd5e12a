"""Faults from outside: misbehaving servers and peers, and a fuzzer of download faults.

Prints each case with how long it took to fail (or succeed) and what it left behind in the
data cache; the fuzzer mixes the servers' faults at random and checks that a placed file is
always one whole version, never a splice. Run:
``pytest tests/benchmarks/test_fault_bench.py --figures -s``.
"""

from __future__ import annotations

import base64
import json
import random
import socket
import threading
import time
from collections.abc import Callable
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import pytest
from httpserver import FileServer

from pytest_cuzk.backends.choice import choose
from pytest_cuzk.backends.workspace import Workspace
from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.core.errors import CuzkError, DataUnavailable
from pytest_cuzk.data.manifest import load_manifest
from pytest_cuzk.data.store import DataStore
from pytest_cuzk.wire.vanilla import largest_file


def _c1(seed: int, size: int) -> bytes:
    raw = random.Random(seed).randbytes(size)
    return json.dumps(
        {"SectorNum": seed, "Phase1Out": base64.b64encode(raw).decode(), "SectorSize": 1}
    ).encode()


OLD, NEW = _c1(1, 600_000), _c1(2, 700_000)


def _left(cache: Path) -> str:
    files = sorted(p for p in cache.rglob("*") if p.is_file() and p.suffix != ".lock")
    return ", ".join(f"{p.relative_to(cache)} ({p.stat().st_size} B)" for p in files) or "nothing"


def _download(tmp: Path, url: str, extra: str = "", **store: float) -> tuple[str, float, str]:
    (tmp / "m").mkdir(parents=True, exist_ok=True)
    (tmp / "m" / "manifest.toml").write_text(f'[kinds.porep]\nfile = "c1.json"\nurl = "{url}"\n{extra}')
    manifest = load_manifest(tmp / "m" / "manifest.toml")
    data = DataStore(tmp / "cache", progress=lambda *a: None, say=lambda line: None, **store)  # type: ignore[arg-type]
    started = time.monotonic()
    try:
        path = data.ensure(manifest.entries["porep"][0], manifest)
        outcome = "placed " + (
            "OLD" if path.read_bytes() == OLD else "NEW" if path.read_bytes() == NEW else "SPLICE"
        )
    except DataUnavailable as exc:
        outcome = "failed: " + exc.reason[:110]
    return outcome, time.monotonic() - started, _left(tmp / "cache")


DOWNLOAD_CASES: dict[str, tuple[Callable[[FileServer], None], str, dict[str, float]]] = {
    "resume answered by another version (ignores If-Range)": (
        lambda s: (s.ignore_if_range(), s.cut_after("/c1.json", 430, then_serve=NEW)),
        "",
        {},
    ),
    "headers a byte every 0.5 s (stall 2 s, deadline 3 s)": (
        lambda s: s.trickle_headers(0.5),
        "",
        {"stall_s": 2.0, "deadline_s": 3.0},
    ),
    "three cut attempts of 0.6 s each (deadline 1.5 s)": (
        lambda s: (s.slow(0.6), s.cut_after("/c1.json", 65536, times=3)),
        "",
        {"deadline_s": 1.5},
    ),
    "Content-Length contradicts size": (lambda s: s.announce(1 << 30), f"size = {len(OLD)}\n", {}),
    "stalls before the body (stall 1 s)": (lambda s: s.slow(5.0), "", {"stall_s": 1.0}),
    "no Content-Length, no sha256": (lambda s: s.leave_out(length=True), "", {}),
}


@pytest.mark.parametrize("case", DOWNLOAD_CASES)
def test_misbehaving_download_servers(case: str, tmp_path: Path) -> None:
    arrange, extra, store = DOWNLOAD_CASES[case]
    with FileServer() as server:
        url = server.add("/c1.json", OLD)
        arrange(server)
        outcome, took, left = _download(tmp_path, url, extra, **store)
    print(f"\nfault [{case}]: {outcome} in {took:.2f} s; left: {left}")
    assert "SPLICE" not in outcome


def test_a_body_larger_than_any_request(tmp_path: Path) -> None:
    for announced in (True, False):
        with FileServer() as server:
            url = server.add_huge("/c1.json", 1 << 30)
            server.leave_out(length=not announced)
            outcome, took, left = _download(tmp_path / str(announced), url)
        what = (
            f"1 GiB body, {'announced' if announced else 'close-delimited'}, bound {largest_file('porep')} B"
        )
        print(f"\nfault [{what}]: {outcome} in {took:.2f} s; left: {left}")
        assert outcome.startswith("failed")


def test_fuzzed_download_faults_never_splice(tmp_path: Path) -> None:
    """Random mixes of cuts, ignored Range or If-Range, missing headers and upstream changes."""
    rng, counts = random.Random(23), {"placed OLD": 0, "placed NEW": 0, "failed": 0, "placed SPLICE": 0}
    started = time.monotonic()
    for n in range(150):
        with FileServer() as server:
            url = server.add("/c1.json", OLD)
            if rng.random() < 0.5:
                server.ignore_if_range()
            if rng.random() < 0.3:
                server.ignore_range()
            server.leave_out(length=rng.random() < 0.2, etag=rng.random() < 0.2)
            if rng.random() < 0.2:
                server.announce(rng.randrange(1, 2 * len(NEW)))
            cuts = rng.randrange(0, 4)
            if cuts:
                server.cut_after("/c1.json", rng.randrange(1, len(OLD)), times=cuts, then_serve=NEW)
            outcome, _, _ = _download(tmp_path / str(n), url, stall_s=2.0, deadline_s=10.0)
        counts["failed" if outcome.startswith("failed") else outcome] += 1
    print(f"\nfuzz [150 download fault mixes]: {counts} in {time.monotonic() - started:.1f} s")
    assert counts["placed SPLICE"] == 0


def _silent() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_peers_at_the_auto_address(pytester: pytest.Pytester) -> None:
    http = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
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
                outcome = "failed: " + str(exc)[:110]
            print(f"\nfault [auto at {name}]: {outcome} in {time.monotonic() - started:.2f} s")
            assert outcome.startswith("chose") == (name == "nothing listens")
    finally:
        http.shutdown()
        http.server_close()
        bare.stop(0)
        silent.close()
        refused.close()
