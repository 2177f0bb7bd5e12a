"""Data manifest and DataStore: real downloads from a local HTTP server, real files, real processes."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import multiprocessing
import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.engine_support import tmpfs
from helpers.httpserver import FileServer
from helpers.support import c1_wrapper, log_line, timed_ensure

from pytest_cuzk.core import progress
from pytest_cuzk.core.errors import DataDirUnwritable, DataUnavailable, ManifestError
from pytest_cuzk.data import store as datastore
from pytest_cuzk.data.manifest import Manifest, load_manifest
from pytest_cuzk.data.store import DataStore
from pytest_cuzk.data.testdata import DEFAULT_MANIFEST
from pytest_cuzk.vocab.kinds import KINDS

# A whole C1 output wrapper (about 1 MB): a download that no sha256 pins must parse as one.
PAYLOAD = c1_wrapper(1, 750_000)
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()
OTHER = c1_wrapper(2, 900_000)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[FileServer]:
    with FileServer() as srv:
        yield srv


@pytest.fixture
def log() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def store(tmp_path: Path, log: io.StringIO) -> DataStore:
    return DataStore(tmp_path / "cache", progress=log_line(log))


def write_manifest(tmp_path: Path, body: str) -> Manifest:
    path = tmp_path / "manifest" / "manifest.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    return load_manifest(path)


def porep_manifest(tmp_path: Path, url: str, sha256: str | None = PAYLOAD_SHA, extra: str = "") -> Manifest:
    pin = f'sha256 = "{sha256}"\n' if sha256 else ""
    return write_manifest(tmp_path, f'[kinds.porep]\nfile = "c1.json"\nurl = "{url}"\n{pin}{extra}')


def counting_hashes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    hashed: list[Path] = []
    real = datastore.file_sha256

    def spy(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(datastore, "file_sha256", spy)
    return hashed


def test_fresh_download_lands_in_the_cache_verified(tmp_path, server, store, log):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD), extra=f"size = {len(PAYLOAD)}\n")
    path = store.ensure(manifest.entries["porep"][0], manifest)
    assert path == tmp_path / "cache" / "c1.json"
    assert path.read_bytes() == PAYLOAD
    assert server.count("/c1.json") == 1
    mb = f"{len(PAYLOAD) / 1e6:.1f}"
    assert log.getvalue().splitlines()[-1] == f"downloading c1.json: {mb}/{mb} MB (100%)"
    assert not path.with_name("c1.json.part").exists()


def test_cached_file_is_not_fetched_nor_hashed_again(tmp_path, server, store, monkeypatch):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    store.ensure(manifest.entries["porep"][0], manifest)
    hashed = counting_hashes(monkeypatch)
    again = DataStore(tmp_path / "cache", progress=log_line())
    path = again.ensure(manifest.entries["porep"][0], manifest)
    assert (server.count(), hashed) == (1, [])
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    again.ensure(manifest.entries["porep"][0], manifest)
    assert (server.count(), hashed) == (1, [path])


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_corrupt_cached_file_is_moved_aside_and_downloaded_again(tmp_path, server, store, damage):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    path = store.ensure(manifest.entries["porep"][0], manifest)
    bad = PAYLOAD[:1000] if damage == "truncated" else bytes([PAYLOAD[0] ^ 1]) + PAYLOAD[1:]
    path.write_bytes(bad)
    os.utime(path, ns=(1, 10**9))  # a new mtime even on coarse-clock file systems
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    assert server.count("/c1.json") == 2
    assert path.with_name("c1.json.corrupt").read_bytes() == bad
    assert any("moved it to" in note and "sha256" in note for note in store.notes)


def test_interrupted_transfer_resumes_with_range(tmp_path, server, store):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.cut_after("/c1.json", 600_000)
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    first, second = server.requests
    assert "Range" not in first.headers
    start = int(re.fullmatch(r"bytes=(\d+)-", second.headers["Range"]).group(1))
    assert 500_000 < start <= 600_000


def test_the_record_of_a_part_keeps_no_secret_of_its_url(tmp_path, server):
    """A cut transfer leaves its ``.part`` and a record of where it came from; the token stays out."""
    store = DataStore(tmp_path / "cache", progress=log_line())
    url = server.add("/c1.json?token=s3cret", PAYLOAD).replace("//", "//T0ken@")
    manifest = porep_manifest(tmp_path, url)
    server.rules.cuts["/c1.json?token=s3cret"] = [600_000] + [0] * (datastore.ATTEMPTS - 1)
    with pytest.raises(DataUnavailable):
        store.ensure(manifest.entries["porep"][0], manifest)
    left = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert any(p.name == "c1.json.part.json" for p in left)
    assert [p for p in left if b"s3cret" in p.read_bytes() or b"T0ken" in p.read_bytes()] == []
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    assert server.requests[-1].headers.get("Range"), "the record still lets the part be resumed"


def test_server_that_ignores_range_gets_a_clean_restart(tmp_path, server, store):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.ignore_range()
    server.cut_after("/c1.json", 600_000)
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    assert [("Range" in r.headers) for r in server.requests] == [False, True]


def test_a_part_with_no_validator_beside_it_is_not_resumed(tmp_path, server, store):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "c1.json.part").write_bytes(b"x" * 1000)
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    (request,) = server.requests
    assert "Range" not in request.headers


def test_transfer_that_keeps_breaking_gives_up(tmp_path, server, store):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.cut_after("/c1.json", 0, times=datastore.ATTEMPTS)
    broke = rf"failed {datastore.ATTEMPTS} times \(the last: transfer broke off after 0 bytes"
    with pytest.raises(DataUnavailable, match=broke):
        store.ensure(manifest.entries["porep"][0], manifest)


def test_404_names_url_file_and_entry(tmp_path, server, store):
    manifest = porep_manifest(tmp_path, server.url("/gone.json"))
    with pytest.raises(DataUnavailable) as info:
        store.ensure(manifest.entries["porep"][0], manifest)
    exc = info.value
    assert (exc.kind, exc.file, exc.manifest, exc.entry_key) == (
        "porep",
        "c1.json",
        manifest.path,
        "kinds.porep",
    )
    assert "HTTP 404" in str(exc) and server.url("/gone.json") in str(exc)
    assert f"download {server.url('/gone.json')}" in exc.hint


def test_unreachable_host(tmp_path, store):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    manifest = porep_manifest(tmp_path, f"http://127.0.0.1:{port}/c1.json")
    with pytest.raises(DataUnavailable, match=rf"cannot reach http://127\.0\.0\.1:{port}/c1\.json"):
        store.ensure(manifest.entries["porep"][0], manifest)


@pytest.mark.parametrize(
    ("kind", "file", "command"),
    [
        ("wpost", "wpost-vanilla.json", "cuzk-bench gen-vanilla window-post ... -o wpost-vanilla.json"),
        (
            "winning",
            "winning-vanilla.json",
            "cuzk-bench gen-vanilla winning-post ... -o winning-vanilla.json",
        ),
        ("snap", "snap-vanilla.json", "cuzk-bench gen-vanilla snap-prove ... -o snap-vanilla.json"),
    ],
)
def test_no_url_says_how_to_produce_the_data(tmp_path, store, kind, file, command):
    manifest = write_manifest(tmp_path, f'[kinds.{kind}]\nfile = "{file}"\n')
    with pytest.raises(DataUnavailable) as info:
        store.ensure(manifest.entries[kind][0], manifest)
    assert command in info.value.hint
    assert f"--cuzk-input {kind}=PATH" in info.value.hint
    assert str(manifest.path) in str(info.value) and f"[kinds.{kind}]" in str(info.value)


def test_reference_engine_data_points_at_gen_data(tmp_path, store):
    manifest = write_manifest(tmp_path, '[engine]\nname = "cuzk-ref"\n[kinds.winning]\nfile = "w.json"\n')
    with pytest.raises(DataUnavailable) as info:
        store.ensure(manifest.entries["winning"][0], manifest)
    assert info.value.hint == f"generate it with `cuzk-ref gen-data {manifest.dir}`"


def test_offline_never_touches_the_network(tmp_path, server):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    offline = DataStore(tmp_path / "cache", offline=True, progress=log_line())
    with pytest.raises(DataUnavailable, match=r"offline mode \(--cuzk-offline\)"):
        offline.ensure(manifest.entries["porep"][0], manifest)
    assert server.requests == []
    DataStore(tmp_path / "cache", progress=log_line()).ensure(manifest.entries["porep"][0], manifest)
    assert offline.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    assert server.count() == 1


def test_sha256_mismatch_after_download_is_not_placed(tmp_path, server, store):
    other = hashlib.sha256(b"other").hexdigest()
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD), sha256=other)
    with pytest.raises(DataUnavailable) as info:
        store.ensure(manifest.entries["porep"][0], manifest)
    assert f"sha256 {PAYLOAD_SHA}, but kinds.porep.sha256 says {other}" in info.value.reason
    assert "was not used" in info.value.hint
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["c1.json.lock"]


def test_size_mismatch_after_download_is_not_placed_and_the_hint_names_the_size_key(tmp_path, server, store):
    size = len(PAYLOAD) + 5
    manifest = porep_manifest(
        tmp_path, server.add("/c1.json", PAYLOAD), sha256=None, extra=f"size = {size}\n"
    )
    server.leave_out(length=True)  # nothing to stop it early: the body ends short
    with pytest.raises(
        DataUnavailable, match=f"gave {len(PAYLOAD)} bytes, but kinds.porep.size says {size}"
    ) as info:
        store.ensure(manifest.entries["porep"][0], manifest)
    assert not (tmp_path / "cache" / "c1.json").exists()
    assert info.value.hint.endswith(f"update kinds.porep.size in {manifest.path}"), "no pin file exists"
    assert "pin" not in str(info.value)


def test_first_download_pins_sha256_and_later_runs_are_held_to_it(tmp_path, server, store):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD), sha256=None)
    path = store.ensure(manifest.entries["porep"][0], manifest)
    pin = tmp_path / "cache" / "c1.json.pin.json"
    assert f"trusting it on first use: recorded sha256 {PAYLOAD_SHA} in {pin}" in store.notes[0]
    path.write_bytes(b"tampered")
    server.add("/c1.json", b"changed upstream")
    with pytest.raises(DataUnavailable) as info:
        store.ensure(manifest.entries["porep"][0], manifest)
    assert f"but pin file {pin} says {PAYLOAD_SHA}" in info.value.reason
    assert info.value.hint.endswith(f"remove {pin} (the sha256 its first download pinned)")
    assert pin.is_file(), "the hint names a file that is there to remove"
    server.add("/c1.json", PAYLOAD)
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    assert server.count() == 3


def test_hand_placed_cache_file_is_pinned_too(tmp_path, store):
    manifest = write_manifest(tmp_path, '[kinds.winning]\nfile = "winning-vanilla.json"\n')
    placed = tmp_path / "cache" / "winning-vanilla.json"
    placed.parent.mkdir()
    placed.write_bytes(PAYLOAD)
    assert store.ensure(manifest.entries["winning"][0], manifest) == placed
    assert PAYLOAD_SHA in store.notes[0]
    placed.write_bytes(PAYLOAD[::-1])
    with pytest.raises(DataUnavailable, match=r"the cached copy has sha256 \w+, but pin file") as info:
        store.ensure(manifest.entries["winning"][0], manifest)
    assert "gen-vanilla winning-post" in info.value.hint
    assert placed.with_name("winning-vanilla.json.corrupt").read_bytes() == PAYLOAD[::-1]


def test_changed_url_drops_the_old_pin_and_fetches_again(tmp_path, server, store):
    old = porep_manifest(tmp_path, server.add("/old.json", OTHER), sha256=None)
    store.ensure(old.entries["porep"][0], old)
    new = porep_manifest(tmp_path, server.add("/new.json", PAYLOAD), sha256=None)
    assert store.ensure(new.entries["porep"][0], new).read_bytes() == PAYLOAD
    assert PAYLOAD_SHA in (tmp_path / "cache" / "c1.json.pin.json").read_text()


def test_file_next_to_the_manifest_is_used_in_place(tmp_path, server, store):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    (manifest.dir / "c1.json").write_bytes(PAYLOAD)
    assert store.ensure(manifest.entries["porep"][0], manifest) == manifest.dir / "c1.json"
    (manifest.dir / "c1.json").write_bytes(b"not it")
    with pytest.raises(DataUnavailable, match="replace or remove"):
        store.ensure(manifest.entries["porep"][0], manifest)
    assert (manifest.dir / "c1.json").read_bytes() == b"not it"
    assert server.requests == []


def test_ensure_all_maps_each_kind_to_a_path_or_the_reason(tmp_path, server, store):
    body = f'[kinds.porep]\nfile = "c1.json"\nurl = "{server.add("/c1.json", PAYLOAD)}"\n'
    manifest = write_manifest(tmp_path, body + '[kinds.wpost]\nfile = "wpost-vanilla.json"\n')
    got = store.ensure_all(manifest, ["porep", "window-post", "snap"])
    assert got["porep"] == [tmp_path / "cache" / "c1.json"]
    assert isinstance(got["wpost"], DataUnavailable) and "gen-vanilla window-post" in got["wpost"].hint
    assert isinstance(got["snap"], DataUnavailable) and "no entry" in got["snap"].reason


def _ensure_in_child(cache: str, manifest_path: str, barrier) -> None:
    manifest = load_manifest(Path(manifest_path))
    barrier.wait(timeout=60)
    DataStore(Path(cache), progress=log_line()).ensure(manifest.entries["porep"][0], manifest)


@pytest.mark.e2e  # two processes
def test_two_processes_download_once(tmp_path, server):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.slow(0.03)  # ~0.5 s in flight, so the second process meets the lock
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    args = (str(tmp_path / "cache"), str(manifest.path), barrier)
    procs = [ctx.Process(target=_ensure_in_child, args=args) for _ in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert server.count() == 1
    assert (tmp_path / "cache" / "c1.json").read_bytes() == PAYLOAD


@pytest.mark.e2e  # two processes
def test_the_deadline_holds_in_a_process_that_waited_for_another_ones_download(tmp_path, server):
    """Two xdist workers: the one that waits on the lock counts the wait, and does not fetch again."""
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.trickle_headers(0.5)  # never done: the first process's download meets its deadline
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    args = (str(tmp_path / "cache"), str(manifest.path), 2.0, barrier, results)
    procs = [ctx.Process(target=timed_ensure, args=args) for _ in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    outcomes = [results.get(timeout=5) for _ in procs]
    assert all(took < 3.0 for took, _ in outcomes), f"against a 2 s deadline: {outcomes}"
    waited, fetched = sorted(reason for _, reason in outcomes)  # "failed: another ..." < "failed: http..."
    assert waited.startswith(
        "failed: another process was downloading it for all of --cuzk-download-timeout (2 s)"
    ), waited
    assert "was still sending after 2 s" in fetched, fetched
    assert server.count() == 1, "the file that did not arrive in time is not fetched again"


def test_default_manifest_lists_every_kind():
    manifest = load_manifest(DEFAULT_MANIFEST)
    assert set(manifest.entries) == set(KINDS)
    porep = manifest.entries["porep"][0]
    assert porep.url == "https://pub-08ae819c828244bdbe5f615fd8c5e144.r2.dev/c1.json"
    assert porep.request == {"registered_proof": 8, "miner_id": 1000, "sector_number": 1}
    assert (porep.sha256, porep.size) == (None, None)
    assert {k: e[0].request["registered_proof"] for k, e in manifest.entries.items()} == {
        "porep": 8,
        "snap": 3,
        "wpost": 13,
        "winning": 3,
    }
    assert all(e[0].url is None for k, e in manifest.entries.items() if k != "porep")


def test_kind_aliases_are_accepted(tmp_path):
    manifest = write_manifest(tmp_path, '[kinds.window-post]\nfile = "w.json"\n')
    assert manifest.entries["wpost"][0].entry_key == "kinds.window-post"


@pytest.mark.parametrize(
    ("body", "where", "says"),
    [
        ('[kinds.stark]\nfile = "x"', "kinds.stark", "unknown proof kind 'stark'; use one of: porep"),
        ("[kinds.porep]\nurl = 'https://x/y'", "kinds.porep.file", 'missing; add file = "<name>"'),
        ('[kinds.porep]\nfile = "/etc/c1.json"', "kinds.porep.file", "--cuzk-input KIND=PATH"),
        ('[kinds.porep]\nfile = "../c1.json"', "kinds.porep.file", "must be a relative path"),
        ('[kinds.porep]\nfile = "c1.json"\nsha256 = "abc"', "kinds.porep.sha256", "must be 64 hex digits"),
        ('[kinds.porep]\nfile = "c1.json"\nsha256 = "' + "g" * 64 + '"', "kinds.porep.sha256", "64 hex"),
        ('[kinds.porep]\nfile = "c1.json"\nsize = -1', "kinds.porep.size", "non-negative integer"),
        ('[kinds.porep]\nfile = "c1.json"\nsize = "1"', "kinds.porep.size", "non-negative integer"),
        ('[kinds.porep]\nfile = "c1.json"\nurl = "ftp://h/c1"', "kinds.porep.url", "http:// or https://"),
        ('[kinds.porep]\nfile = "c1.json"\nurl = "file:///c1"', "kinds.porep.url", "http:// or https://"),
        ('[kinds.porep]\nfile = "c1.json"\nsha = "x"', "kinds.porep.sha", "unknown key; known keys: file"),
        ('[kinds.porep]\nfile = "c1.json"\nrequest = 3', "kinds.porep.request", "must be a table"),
        (
            '[kinds.porep]\nfile = "x"\n[kinds.porep.request]\nminer_id = -5',
            "kinds.porep.request.miner_id",
            "non-negative integer, got -5",
        ),
        (
            '[kinds.porep]\nfile = "x"\n[kinds.porep.request]\nsector_number = true',
            "kinds.porep.request.sector_number",
            "non-negative integer, got True",
        ),
        (
            '[kinds.wpost]\nfile = "x"\n[kinds.wpost.request]\nrandomness = "zz"',
            "kinds.wpost.request.randomness",
            "must be hex bytes",
        ),
        (
            '[kinds.snap]\nfile = "x"\n[kinds.snap.request]\ncomm_r_old = 7',
            "kinds.snap.request.comm_r_old",
            "must be hex bytes",
        ),
        (
            '[kinds.porep]\nfile = "x"\n[kinds.porep.request]\nminer = 1',
            "kinds.porep.request.miner",
            "unknown request field; known fields: registered_proof",
        ),
        (
            '[kinds.porep]\nfile = "a"\n[kinds.porep-c2]\nfile = "b"',
            "kinds.porep-c2",
            "same kind as [kinds.porep]",
        ),
        ("kinds = 3", "kinds", "must hold tables"),
        ("engine = 1", "engine", "must be a table"),
        ('[kind.porep]\nfile = "x"', "kind", "unknown top-level key"),
        ("[kinds.porep", "", "not valid TOML"),
    ],
)
def test_manifest_errors_name_file_key_and_fix(tmp_path, body, where, says):
    with pytest.raises(ManifestError) as info:
        write_manifest(tmp_path, body)
    path = tmp_path / "manifest" / "manifest.toml"
    assert str(info.value).startswith(f"{path}: {where}: " if where else f"{path}: ")
    assert says in str(info.value)


def test_missing_manifest_names_the_option(tmp_path):
    with pytest.raises(ManifestError, match=r"cannot read the data manifest.*check --cuzk-manifest"):
        load_manifest(tmp_path / "nope.toml")


def test_several_sectors_of_a_kind_are_listed_and_checked_each(tmp_path):
    body = """
[[kinds.porep]]
file = "c1-a.json"
request = {sector_number = 1}

[[kinds.porep]]
file = "c1-b.json"
request = {sector_number = 2}
"""
    manifest = write_manifest(tmp_path, body)
    assert [e.file for e in manifest.entries["porep"]] == ["c1-a.json", "c1-b.json"]
    assert [e.entry_key for e in manifest.entries["porep"]] == ["kinds.porep[0]", "kinds.porep[1]"]
    (manifest.dir / "c1-a.json").write_bytes(b"a")
    store = DataStore(tmp_path / "cache", progress=log_line())
    (found,) = store.ensure_all(manifest, ["porep"]).values()
    assert isinstance(found, DataUnavailable), "one missing sector makes the kind unavailable"
    assert found.entry_key == "kinds.porep[1]"


def test_requests_take_the_sectors_in_turn_with_their_own_fields(tmp_path, pytester):
    from pytest_cuzk.config.settings import resolve_settings
    from pytest_cuzk.data.testdata import TestData

    body = """
[[kinds.porep]]
file = "c1-a.json"
request = {miner_id = 1000, sector_number = 1}

[[kinds.porep]]
file = "c1-b.json"
request = {miner_id = 1000, sector_number = 2}
"""
    manifest = write_manifest(tmp_path, body)
    (manifest.dir / "c1-a.json").write_bytes(c1_wrapper(1, 100))
    (manifest.dir / "c1-b.json").write_bytes(c1_wrapper(2, 100))
    data = TestData(resolve_settings(pytester.parseconfig()), manifest.path, None)
    requests = [data.request(KINDS["porep"]) for _ in range(4)]
    assert [r.sector_number for r in requests] == [1, 2, 1, 2]
    assert [r.vanilla_proof for r in requests[:2]] == [c1_wrapper(1, 100), c1_wrapper(2, 100)]
    assert len({r.request_id for r in requests}) == 4 and data.sectors(KINDS["porep"]) == 2


def test_test_data_raises_why_a_kind_cannot_be_had_and_says_it_is_not_available(tmp_path, pytester):
    from pytest_cuzk.config.settings import resolve_settings
    from pytest_cuzk.data.testdata import TestData

    manifest = write_manifest(tmp_path, '[kinds.porep]\nfile = "c1.json"\n')
    data = TestData(resolve_settings(pytester.parseconfig("--cuzk-offline")), manifest.path, None)
    with pytest.raises(DataUnavailable) as info:
        data.path(KINDS["porep"])
    assert info.value.kind == "porep" and "c1.json" in str(info.value)
    assert data.available(KINDS["porep"]) is False
    with pytest.raises(DataUnavailable, match="no entry"):
        data.paths(KINDS["snap"])


def test_a_cut_download_with_no_length_and_no_sha256_is_never_placed_nor_pinned(tmp_path, server):
    said = io.StringIO()
    store = DataStore(tmp_path / "cache", progress=log_line(said))
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD), sha256=None)
    server.leave_out(length=True)
    server.cut_after("/c1.json", len(PAYLOAD) // 2, times=datastore.ATTEMPTS)
    with pytest.raises(DataUnavailable, match="cannot be trusted: the server sent no Content-Length"):
        store.ensure(manifest.entries["porep"][0], manifest)
    assert not (tmp_path / "cache" / "c1.json").exists()
    assert not (tmp_path / "cache" / "c1.json.pin.json").exists()
    assert "trusting" not in said.getvalue()


def test_a_whole_download_with_no_length_is_trusted_on_first_use_and_says_so(tmp_path, server):
    said = io.StringIO()
    store = DataStore(tmp_path / "cache", progress=log_line(said))
    manifest = write_manifest(
        tmp_path, f'[kinds.porep]\nfile = "c1.json"\nurl = "{server.add("/c1.json", PAYLOAD)}"\n'
    )
    server.leave_out(length=True)
    with pytest.raises(DataUnavailable, match="the server sent no Content-Length"):
        store.ensure(manifest.entries["porep"][0], manifest)
    server.leave_out()
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    assert said.getvalue().count("trusting it on first use") == 1


def test_a_resume_against_a_changed_file_takes_the_new_file_whole(tmp_path, server, store):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD), sha256=None)
    server.cut_after("/c1.json", 600_000, then_serve=OTHER)
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == OTHER, "nothing spliced"
    _, second = server.requests
    assert second.headers["If-Range"] == f'"{hashlib.sha1(PAYLOAD).hexdigest()}"'


def test_a_resume_without_a_validator_starts_over(tmp_path, server, store):
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.leave_out(etag=True)
    server.cut_after("/c1.json", 600_000)
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    assert "Range" not in server.requests[1].headers


def test_a_stalled_server_is_given_up_after_the_stall_deadline(tmp_path, server):
    store = DataStore(tmp_path / "cache", progress=log_line(), stall_s=0.5)
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.slow(3.0)
    started = time.monotonic()
    with pytest.raises(
        DataUnavailable, match=r"sent no byte for 0.5 s after 0 bytes \(--cuzk-download-stall\)"
    ):
        store.ensure(manifest.entries["porep"][0], manifest)
    assert time.monotonic() - started < 3


def test_a_trickling_server_is_given_up_at_the_overall_deadline(tmp_path, server):
    store = DataStore(tmp_path / "cache", progress=log_line(), deadline_s=1.0)
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.trickle(0.01)
    with pytest.raises(DataUnavailable, match=r"was still sending after 1 s \(\d+ bytes so far"):
        store.ensure(manifest.entries["porep"][0], manifest)


def test_a_206_of_another_version_is_never_spliced_onto_the_part(tmp_path, server, store):
    """A server that ignores If-Range answers the resume with the new file's tail: start over."""
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD), sha256=None)
    server.ignore_if_range()
    server.cut_after("/c1.json", 430, then_serve=OTHER)
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == OTHER, "nothing spliced"
    _, resumed, fresh = server.requests
    assert resumed.headers["Range"] == "bytes=430-" and "Range" not in fresh.headers
    pin = json.loads((tmp_path / "cache" / "c1.json.pin.json").read_text())
    assert pin["sha256"] == hashlib.sha256(OTHER).hexdigest()


def test_headers_trickled_a_byte_at_a_time_meet_the_stall_time(tmp_path, server):
    """A head's bytes are no progress: it must arrive whole within --cuzk-download-stall."""
    store = DataStore(tmp_path / "cache", progress=log_line(), stall_s=1.0, deadline_s=30.0)
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.trickle_headers(0.2)
    started = time.monotonic()
    with pytest.raises(
        DataUnavailable, match=r"sent no whole response head in 1 s \(--cuzk-download-stall\)"
    ):
        store.ensure(manifest.entries["porep"][0], manifest)
    assert time.monotonic() - started < 5.0
    assert server.count("/c1.json") == 1, "a stall is not tried again"


def test_headers_trickled_past_the_deadline_are_cut_at_it(tmp_path, server):
    store = DataStore(tmp_path / "cache", progress=log_line(), stall_s=60.0, deadline_s=2.5)
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.trickle_headers(0.5)
    started = time.monotonic()
    with pytest.raises(DataUnavailable, match=r"was still sending after 2.5 s \(0 bytes so far"):
        store.ensure(manifest.entries["porep"][0], manifest)
    assert time.monotonic() - started < 4.0
    assert server.count("/c1.json") == 1, "the deadline is the download's, not one attempt's"


@pytest.mark.parametrize("nbytes", [12, 40, 90])  # in the status line, in a header, before the blank line
def test_a_head_cut_short_is_a_broken_transfer_not_an_empty_file(tmp_path, server, nbytes):
    store = DataStore(tmp_path / "cache", progress=log_line())
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.cut_head("/c1.json", nbytes, times=datastore.ATTEMPTS)
    with pytest.raises(DataUnavailable, match=f"failed {datastore.ATTEMPTS} times") as info:
        store.ensure(manifest.entries["porep"][0], manifest)
    assert "sha256" not in info.value.reason and "e3b0c442" not in str(info.value)
    server.cut_head("/c1.json", nbytes)  # once: the next attempt gets the file
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD


def test_the_head_cut_inside_its_headers_is_named(tmp_path, server):
    store = DataStore(tmp_path / "cache", progress=log_line())
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.cut_head("/c1.json", 90, times=datastore.ATTEMPTS)
    with pytest.raises(DataUnavailable, match=r"the connection ended inside the response head, after 90 "):
        store.ensure(manifest.entries["porep"][0], manifest)


def test_attempts_back_off(tmp_path, server):
    """urllib3's backoff between attempts: none before the second, a second before the third."""
    store = DataStore(tmp_path / "cache", progress=log_line())
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.cut_after("/c1.json", 0, times=datastore.ATTEMPTS)
    seen: list[float] = []
    real = server.record
    server.record = lambda request: (seen.append(time.monotonic()), real(request))  # type: ignore[method-assign]
    with pytest.raises(DataUnavailable):
        store.ensure(manifest.entries["porep"][0], manifest)
    assert len(seen) == datastore.ATTEMPTS
    assert seen[2] - seen[1] >= 0.9


def test_a_busy_server_is_asked_again(tmp_path, server):
    store = DataStore(tmp_path / "cache", progress=log_line())
    manifest = porep_manifest(tmp_path, server.url("/c1.json"))
    with pytest.raises(DataUnavailable, match=r"failed 3 times \(the last: .* answered HTTP 503"):
        server.unavailable("/c1.json", times=datastore.ATTEMPTS)
        store.ensure(manifest.entries["porep"][0], manifest)
    server.add("/c1.json", PAYLOAD)
    server.unavailable("/c1.json", times=1)
    assert store.ensure(manifest.entries["porep"][0], manifest).read_bytes() == PAYLOAD
    assert server.count("/c1.json") == datastore.ATTEMPTS + 2


def test_a_ci_log_shows_a_download_that_gets_no_byte(tmp_path, server, monkeypatch):
    """The wait for a head that trickles is shown like every other wait, though no byte of a body came."""
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.5)
    out = io.StringIO()
    store = DataStore(tmp_path / "cache", progress=log_line(out), stall_s=60.0, deadline_s=2.2)
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.trickle_headers(0.3)
    with pytest.raises(DataUnavailable, match=r"was still sending after 2\.2 s"):
        store.ensure(manifest.entries["porep"][0], manifest)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2, lines
    assert all(re.fullmatch(r"cuzk: downloading c1\.json \(0\.0 MB\): \d s of 2 s", line) for line in lines)


def test_too_many_redirects_are_said_once(tmp_path, server):
    store = DataStore(tmp_path / "cache", progress=log_line())
    manifest = porep_manifest(tmp_path, server.url("/c1.json"))
    server.redirect("/c1.json", "/c1.json")
    with pytest.raises(DataUnavailable, match=r"Exceeded 30 redirects\. ") as info:
        store.ensure(manifest.entries["porep"][0], manifest)
    assert ".." not in str(info.value)


def test_one_deadline_holds_across_the_retries(tmp_path, server):
    store = DataStore(tmp_path / "cache", progress=log_line(), deadline_s=1.5)
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    server.slow(0.6)  # each attempt: 0.6 s, one chunk, then the cut
    server.cut_after("/c1.json", 64 * 1024, times=datastore.ATTEMPTS)
    started = time.monotonic()
    with pytest.raises(
        DataUnavailable, match=r"was still sending after 1.5 s \(\d+ bytes so far, all attempts"
    ):
        store.ensure(manifest.entries["porep"][0], manifest)
    assert time.monotonic() - started < 2.5, "three attempts of 0.6 s and more would take longer"


def test_a_length_that_contradicts_the_manifest_size_stops_before_the_body(tmp_path, server, store):
    size = len(PAYLOAD)
    manifest = porep_manifest(
        tmp_path, server.add_huge("/c1.json", 1 << 30), sha256=None, extra=f"size = {size}\n"
    )
    started = time.monotonic()
    with pytest.raises(
        DataUnavailable, match=f"announces {1 << 30} bytes, but the manifest's size says {size}"
    ):
        store.ensure(manifest.entries["porep"][0], manifest)
    assert time.monotonic() - started < 2
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["c1.json.lock"]


def test_a_length_that_contradicts_the_manifest_size_names_the_size_key_to_fix(tmp_path, server, store):
    """Fetching the same file by hand would not help: the hint names the manifest key, no pin file."""
    manifest = porep_manifest(
        tmp_path, server.add("/c1.json", PAYLOAD), sha256=None, extra=f"size = {len(PAYLOAD) + 5}\n"
    )
    with pytest.raises(DataUnavailable, match=f"announces {len(PAYLOAD)} bytes") as info:
        store.ensure(manifest.entries["porep"][0], manifest)
    assert info.value.hint == (
        f"the file was not used; if {server.url('/c1.json')} changed on purpose, "
        f"update kinds.porep.size in {manifest.path}"
    )
    assert "pin" not in str(info.value)


def test_a_close_delimited_body_longer_than_the_manifest_size_stops_there_and_names_the_size_key(
    tmp_path, server, store
):
    manifest = porep_manifest(
        tmp_path, server.add_huge("/c1.json", 1 << 30), sha256=None, extra="size = 1000\n"
    )
    server.leave_out(length=True)  # no Content-Length to contradict: the body itself does
    started = time.monotonic()
    with pytest.raises(
        DataUnavailable, match="sent more than the 1000 bytes the manifest's size says"
    ) as info:
        store.ensure(manifest.entries["porep"][0], manifest)
    assert time.monotonic() - started < 2 and server.count("/c1.json") == 1
    assert info.value.hint.endswith(f"update kinds.porep.size in {manifest.path}"), info.value.hint
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["c1.json.lock"]


@pytest.mark.parametrize("announced", [True, False])
def test_a_body_larger_than_any_request_is_refused_once_and_not_kept(tmp_path, server, store, announced):
    """No size in the manifest: the bound is the largest request cuzk accepts (128 MiB for a C1 file)."""
    from pytest_cuzk.vocab.vanilla import largest_file

    limit = largest_file("porep")
    manifest = porep_manifest(tmp_path, server.add_huge("/c1.json", limit + (1 << 20)), sha256=None)
    server.leave_out(length=not announced)
    said = (
        f"announces {limit + (1 << 20)} bytes, more than the {limit}"
        if announced
        else f"more than {limit} bytes"
    )
    with pytest.raises(DataUnavailable, match=said):
        store.ensure(manifest.entries["porep"][0], manifest)
    assert server.count("/c1.json") == 1, "a body that cannot fit is not fetched again"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["c1.json.lock"]


def _wrapped(inner: object, **wrapper: object) -> bytes:
    """A wrapper around ``inner`` (JSON, base64 as Go writes []byte), its fields overridden."""
    phase1 = base64.b64encode(json.dumps(inner).encode()).decode()
    return json.dumps({"SectorNum": 1, "Phase1Out": phase1, "SectorSize": 34359738368, **wrapper}).encode()


def _inner(vanilla: object, proof: str = "StackedDrg32GiBV1_1") -> dict[str, object]:
    return {"registered_proof": proof, "vanilla_proofs": vanilla,
            **{k: [7] * 32 for k in ("comm_r", "comm_d", "replica_id", "seed", "ticket")}}  # fmt: skip


WHOLE = json.loads(base64.b64decode(json.loads(PAYLOAD)["Phase1Out"]))
BLOB = base64.b64encode(bytes(range(60))).decode()  # a 60-byte blob: at least a bincode proof's size
SHAPE = "StackedDrg32GiBV1"


@pytest.mark.parametrize(
    ("kind", "raw", "problem"),
    [
        ("porep", PAYLOAD, None),
        ("porep", PAYLOAD[: len(PAYLOAD) // 2], "not complete C1 output wrapper JSON"),
        ("porep", b'{"SectorNum": 1}', "not a C1 output wrapper"),
        ("porep", json.dumps({"Phase1Out": "e30="}).encode(),
         "its SectorNum must be a non-negative integer, as Curio writes it; got missing"),
        ("porep", _wrapped(WHOLE, SectorNum="1"),
         "its SectorNum must be a non-negative integer, as Curio writes it; got '1'"),
        ("porep", _wrapped(WHOLE, SectorSize=None), "its SectorSize must be a non-negative integer"),
        ("porep", _wrapped(WHOLE, Phase1Out="QR=="), "its Phase1Out is not base64 (not canonical"),
        ("porep", _wrapped(WHOLE, Phase1Out="QQ"), "its Phase1Out is not base64"),
        ("porep", _wrapped({}),
         "not a C1 output (SealCommitPhase1Output): no registered_proof, vanilla_proofs"),
        ("porep", _wrapped([1]), "is not a C1 output (SealCommitPhase1Output): not a JSON object"),
        ("porep", _wrapped(_inner([[{"x": 1}]])),
         "vanilla_proofs must be keyed by the registered proof's shape"),
        ("porep", _wrapped(_inner({SHAPE: []})), f"vanilla_proofs.{SHAPE} must be a non-empty list"),
        ("porep", _wrapped(_inner({SHAPE: [[]]})), f"vanilla_proofs.{SHAPE}[0] must be a non-empty list"),
        ("porep", _wrapped(_inner({SHAPE: [["junk"]]})), "[0] must be a non-empty list of challenge proofs"),
        ("porep", _wrapped(_inner({"StackedDrg2KiBV1": [[{}]]})),
         "keyed StackedDrg2KiBV1, not the shape of registered_proof 'StackedDrg32GiBV1_1'"),
        ("wpost", json.dumps([BLOB, BLOB]).encode(), None),
        ("wpost", b"[]", "an empty array"),
        ("wpost", b'["QR=="]', "entry [0] is not base64 (not canonical"),
        ("wpost", b'["aGVsbG8="]', "entry [0] is 5 bytes, too short for a vanilla proof (at least 48)"),
        ("wpost", b"[1, 2]", "not a JSON array of base64 strings"),
        ("wpost", b'["aGVsbG8=", "d29y', "not a complete JSON array of base64 strings"),
        ("snap", b"\x01\x02raw bincode", "its completeness cannot be checked"),
    ],
)  # fmt: skip
def test_a_file_is_held_to_its_kinds_real_format(kind, raw, problem):
    from pytest_cuzk.vocab.vanilla import format_problem, shape_problem

    found = format_problem(kind, raw)
    assert (found is None) if problem is None else (problem in (found or "")), found
    if problem is not None and "cannot be checked" not in problem:
        assert shape_problem(kind, raw) == found
    assert shape_problem("snap", b"\x01\x02raw bincode") is None, "a raw proof is allowed, as cuzk-bench does"


def test_a_malformed_input_file_is_named_before_any_daemon_sees_it(tmp_path):
    from pytest_cuzk.data.inputs import build_request

    path = tmp_path / "c1.json"
    path.write_bytes(_wrapped(WHOLE, SectorNum="1"))
    with pytest.raises(ValueError, match=r"c1.json: not porep data as cuzk reads it: its SectorNum must be"):
        build_request(KINDS["porep"], path, {})
    path.write_bytes(PAYLOAD)
    assert build_request(KINDS["porep"], path, {}).vanilla_proof == PAYLOAD


@pytest.mark.parametrize("read_only", [False, True])
def test_a_cache_that_cannot_be_written_names_the_file_fails_at_once_and_leaves_nothing(
    tmp_path, server, read_only
):
    """A full or read-only --cuzk-data-dir is no broken transfer: one try, the file named, no .part kept."""
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    with tmpfs(tmp_path / "cache", size="64k", read_only=read_only) as cache:
        store = DataStore(cache, progress=log_line())
        with pytest.raises(DataDirUnwritable) as info:
            store.ensure(manifest.entries["porep"][0], manifest)
        left = sorted(p.name for p in cache.iterdir())
    if read_only:
        assert str(info.value).startswith(f"cannot write {cache / 'c1.json.lock'}: Read-only file system; ")
        assert left == []
    else:
        assert str(info.value) == (
            f"cannot write {cache / 'c1.json.part'}: No space left on device; "
            "free space on that disk, or pass --cuzk-data-dir DIR on one with room"
        )
        assert server.count("/c1.json") == 1, "a full disk is not retried"
        assert left == ["c1.json.lock"], "no partial download is left"


def test_a_cache_file_that_is_a_directory_is_named_as_unusable_not_unwritable(tmp_path, server):
    """Not every OSError of the cache is a full or read-only disk: the message says what the kernel said."""
    manifest = porep_manifest(tmp_path, server.add("/c1.json", PAYLOAD))
    cache = tmp_path / "cache"
    (cache / "c1.json.lock").mkdir(parents=True)
    with pytest.raises(DataDirUnwritable) as info:
        DataStore(cache, progress=log_line()).ensure(manifest.entries["porep"][0], manifest)
    assert str(info.value) == (
        f"cannot use {cache / 'c1.json.lock'}: Is a directory; "
        "check that directory, or pass --cuzk-data-dir DIR"
    )
    assert server.count("/c1.json") == 0, "nothing is downloaded into a cache that cannot be used"
