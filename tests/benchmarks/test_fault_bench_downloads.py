"""The faults from outside that came through download servers, each reproduced as it was found.

A resume answered with another version, trickled headers and bodies, cut attempts, sizes that
contradict the manifest, a shared deadline, bodies of no or any size, and a fuzzer of download
faults that must never splice two versions. Each case prints one row (``faultbench.row``), as
``test_fault_bench.py``'s do. Run: ``pytest tests/benchmarks/test_fault_bench*.py --figures -s``.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from helpers.faultbench import NEW, OLD, files_in, row
from helpers.httpserver import FileServer
from helpers.support import log_line, timed_ensure

from pytest_cuzk.core.errors import DataUnavailable
from pytest_cuzk.data.manifest import load_manifest
from pytest_cuzk.data.store import DataStore
from pytest_cuzk.vocab.vanilla import largest_file

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass


def _download(tmp: Path, url: str, extra: str = "", **store: float) -> tuple[str, float, str]:
    (tmp / "m").mkdir(parents=True, exist_ok=True)
    (tmp / "m" / "manifest.toml").write_text(f'[kinds.porep]\nfile = "c1.json"\nurl = "{url}"\n{extra}')
    manifest = load_manifest(tmp / "m" / "manifest.toml")
    data = DataStore(tmp / "cache", progress=log_line(), **store)  # type: ignore[arg-type]
    started = time.monotonic()
    try:
        body = data.ensure(manifest.entries["porep"][0], manifest).read_bytes()
        outcome = "placed " + ("OLD" if body == OLD else "NEW" if body == NEW else "SPLICE")
    except DataUnavailable as exc:
        outcome = f"failed: {exc.reason}. {exc.hint}"
    return outcome, time.monotonic() - started, "cache: " + files_in(tmp / "cache")


# fault, how the server misbehaves, manifest lines, DataStore bounds, the most seconds it may take
DOWNLOAD_CASES: dict[str, tuple[int, Callable[[FileServer], object], str, dict[str, float], float]] = {
    "resume: a 206 of another version whose ETag differs from If-Range": (
        1, lambda s: (s.ignore_if_range(), s.cut_after("/c1.json", 430, then_serve=NEW)), "", {}, 10,
    ),
    "resume: a 206 of another version whose Last-Modified differs from If-Range": (
        1,
        lambda s: (s.ignore_if_range(), s.leave_out(etag=True), s.date_versions(),
                   s.cut_after("/c1.json", 430, then_serve=NEW)),
        "", {}, 10,
    ),
    "resume: a 206 of another version, no validator to send": (
        1,
        lambda s: (s.ignore_if_range(), s.leave_out(etag=True), s.cut_after("/c1.json", 430, then_serve=NEW)),
        "", {}, 10,
    ),
    "headers a byte every 0.5 s (stall 2 s, deadline 3 s)": (
        2, lambda s: s.trickle_headers(0.5), "", {"stall_s": 2.0, "deadline_s": 3.0}, 3.5,
    ),
    "body a byte every 0.5 s (stall 2 s, deadline 3 s)": (
        2, lambda s: s.trickle(0.5), "", {"stall_s": 2.0, "deadline_s": 3.0}, 3.5,
    ),
    "three cut attempts of 0.6 s each (deadline 1.5 s over all)": (
        2, lambda s: (s.slow(0.6), s.cut_after("/c1.json", 65536, times=3)), "", {"deadline_s": 1.5}, 2.0,
    ),
    "stalls before the body (stall 1 s)": (2, lambda s: s.slow(5.0), "", {"stall_s": 1.0}, 1.5),
    "Content-Length 1 GiB contradicts the manifest's size": (
        7, lambda s: s.announce(1 << 30), f"size = {len(OLD)}\n", {}, 1.0,
    ),
    "close-delimited 1 GiB body, manifest's size 1000": (
        7, lambda s: (s.add_huge("/c1.json", 1 << 30), s.leave_out(length=True)), "size = 1000\n", {}, 1.0,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", DOWNLOAD_CASES)
def test_misbehaving_download_servers(case: str, tmp_path: Path) -> None:
    fault, arrange, extra, store, bound = DOWNLOAD_CASES[case]
    with FileServer() as server:
        url = server.add("/c1.json", OLD)
        arrange(server)
        outcome, took, left = _download(tmp_path, url, extra, **store)
        resumes = sum("If-Range" in r.headers for r in server.requests)
    row(fault, case, f"{outcome} ({server.count()} GET, {resumes} with If-Range)", took, left)
    assert "SPLICE" not in outcome and took <= bound
    pins = re.findall(r"\S+\.pin\.json", outcome)
    assert all(Path(p).exists() for p in pins), f"the hint names a pin file that is not there: {pins}"
    if "size = " in extra:  # the body contradicts the manifest: the hint names that key
        assert "update kinds.porep.size in" in outcome, outcome
    pin = tmp_path / "cache" / "c1.json.pin.json"
    if fault == 1:  # the splice is refused; what is placed, and pinned, is one whole version
        assert outcome in ("placed OLD", "placed NEW"), outcome
        assert resumes == (0 if "no validator" in case else 1), "the resume, and its 206, were tried"
        assert hashlib.sha256(OLD if outcome == "placed OLD" else NEW).hexdigest() in pin.read_text()


def test_the_hint_after_upstream_changed_names_what_to_fix(tmp_path: Path) -> None:
    with FileServer() as server:
        url = server.add("/c1.json", OLD)
        assert _download(tmp_path, url)[0] == "placed OLD"  # no sha256 in the manifest: pinned on first use
        (tmp_path / "cache" / "c1.json").unlink()
        server.add("/c1.json", NEW)
        cases = {
            "sha256": ("", "remove "),
            "size": (f"size = {len(OLD)}\n", "update kinds.porep.size in "),
        }
        for field, (extra, fix) in cases.items():
            outcome, took, left = _download(tmp_path, url, extra)
            pins = re.findall(r"\S+\.pin\.json", outcome)
            named = f"hint: {fix.strip()} {'the pin file' if pins else 'the manifest key'}"
            row(
                10,
                f"upstream changed its {field} after the first download pinned it ({named})",
                outcome,
                took,
                left,
            )
            assert outcome.startswith("failed") and fix in outcome and all(Path(p).exists() for p in pins), (
                outcome
            )


def test_a_deadline_shared_by_two_workers(tmp_path: Path) -> None:
    """Two processes (as two xdist workers) need the file; the server trickles its headers."""
    with FileServer() as server:
        url = server.add("/c1.json", OLD)
        server.trickle_headers(0.5)
        (tmp_path / "manifest.toml").write_text(f'[kinds.porep]\nfile = "c1.json"\nurl = "{url}"\n')
        ctx = multiprocessing.get_context("spawn")
        barrier, results = ctx.Barrier(2), ctx.Queue()
        args = (str(tmp_path / "cache"), str(tmp_path / "manifest.toml"), 3.0, barrier, results)
        procs = [ctx.Process(target=timed_ensure, args=args) for _ in range(2)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout=60)
        outcomes = sorted(results.get(timeout=5) for _ in procs)
    for n, (took, outcome) in enumerate(outcomes, 1):
        row(2, f"worker {n} of 2, headers a byte every 0.5 s (deadline 3 s; {server.count()} GET in all)",
            outcome, took, "cache: " + files_in(tmp_path / "cache"))  # fmt: skip
    assert all(took < 4.0 for took, _ in outcomes) and server.count() == 1


def test_a_body_with_no_size_is_fetched_once_and_streamed(tmp_path: Path) -> None:
    with FileServer() as server:
        url = server.add("/c1.json", OLD)
        server.leave_out(length=True)
        outcome, took, left = _download(tmp_path, url)
        gets = server.count("/c1.json")
    row(7, f"no Content-Length, no size, no sha256 ({gets} GET)", outcome, took, left)
    assert gets == 1


def test_a_body_larger_than_any_request(tmp_path: Path) -> None:
    bound = largest_file("porep")
    for announced in (True, False):
        with FileServer() as server:
            url = server.add_huge("/c1.json", 1 << 30)
            server.leave_out(length=not announced)
            before = psutil.Process().memory_info().rss
            outcome, took, left = _download(tmp_path / str(announced), url)
            grown = (psutil.Process().memory_info().rss - before) >> 20
        how = "announced" if announced else "close-delimited"
        row(7, f"1 GiB body, {how}, bound {bound} B (RSS +{grown} MiB)", outcome, took, left)
        assert outcome.startswith("failed") and "pin" not in left
        assert grown < 64, "streamed to disk, not read whole into memory"


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
    row(1, "150 fuzzed download fault mixes", str(counts), time.monotonic() - started, "see counts")
    assert counts["placed SPLICE"] == 0 and counts["placed OLD"] + counts["placed NEW"] > 0
