"""The results database on SQLite and on a real PostgreSQL: schema, migration, round trip, concurrency."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import pg

from pytest_cuzk.results.database import (
    SCHEMA_VERSION,
    ResultsDB,
    build_metadata,
    create_engine,
    default_url,
    migrate,
    normalize_url,
    schema_version,
)
from pytest_cuzk.results.rows import HostRecord, RunRecord, TestRecord

db_url, pg_server = pg.db_url, pg.pg_server  # each test runs on SQLite and on PostgreSQL
REPO = Path(__file__).resolve().parents[2]
GIB = 2**30

# A pytest run writing one test after another, printing how many it has committed; it never
# finishes on its own (``count`` < 0), so it must be killed, or it writes ``count`` tests and ends.
WRITER = """
import sys
from pytest_cuzk.results.rows import HostRecord, RunRecord, TestRecord
from pytest_cuzk.results.database import ResultsDB
url, label, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
host = HostRecord.of(gpu_models=["RTX 4090"], gpu_count=1, vram_total_bytes=24 << 30, cpu_model="cpu",
                     cpu_cores=8, ram_bytes=64 << 30)
db = ResultsDB(url)
run = RunRecord(host=host, daemon_build="b1", label=label)
db.start_run(run)
print("started", flush=True)
i = 0
while count < 0 or i < count:
    db.record_test(TestRecord(run_id=run.run_id, nodeid=f"test_prove[{i}]", kind="porep", batch_size=1,
        concurrency=1, proofs_ok=i, proofs_failed=0, p50_s=float(i), p90_s=float(i), max_s=float(i),
        proofs_per_hour=float(i), rss_peak_bytes=i, cold_start={"ready": float(i)}, label=label))
    i += 1
    print(i, flush=True)
if count >= 0:
    db.finish_run(run.run_id)
"""


def host(**over: object) -> HostRecord:
    facts = dict(
        gpu_models=["NVIDIA A40", "NVIDIA A40"],
        gpu_count=2,
        vram_total_bytes=96 * GIB,
        cpu_model="AMD EPYC 7543",
        cpu_cores=64,
        ram_bytes=2048 * GIB,
        driver="550.54",
        cuda="12.4",
        hostname="a40-host",
    )
    return HostRecord.of(**{**facts, **over})


def make_test(run_id: str, nodeid: str = "test_prove[porep-batch1-j1]", **over: object) -> TestRecord:
    values = dict(
        kind="porep",
        batch_size=1,
        concurrency=1,
        proofs_ok=4,
        proofs_failed=1,
        p50_s=88.25,
        p90_s=97.5,
        max_s=101.0,
        proofs_per_hour=35.9,
        rss_peak_bytes=190 * GIB,
        vram_peak_bytes=21 * GIB,
        cold_start={"start": 0.5, "ready": 12.0, "srs_load": 9.5, "warmup": 30.0, "pce": 41.0},
        sampler_interval_s=0.1,
        label="a40",
    )
    return TestRecord(run_id=run_id, nodeid=nodeid, **{**values, **over})


def spawn_writer(url: str, label: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, url, label, str(count)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_creates_schema_at_current_version(db_url: str) -> None:
    with ResultsDB(db_url) as db, db.engine.connect() as conn:
        assert schema_version(conn) == SCHEMA_VERSION
        columns = {c["name"] for c in sa.inspect(conn).get_columns("tests")}
        if conn.dialect.name == "sqlite":  # readers must not block the workers' writes
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    assert {"sampler_interval_s", "rss_peak_bytes", "vram_peak_bytes", "cold_start"} <= columns


def write_old(
    engine: sa.Engine, version: int, old_host: HostRecord, run: RunRecord, test: TestRecord
) -> None:
    """A database as pytest-cuzk wrote it at schema ``version``: only the columns that version had."""
    md = build_metadata(version)

    def known(table: str, values: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in values.items() if k in md.tables[table].c}

    run_values = {k: v for k, v in dataclasses.asdict(run).items() if k != "host"}
    run_values["hostname"] = old_host.hostname  # a v3 run keeps its own; earlier ones had none
    with engine.begin() as conn:
        md.create_all(conn)
        conn.execute(md.tables["schema_version"].insert().values(version=version))
        conn.execute(md.tables["hosts"].insert().values(**dataclasses.asdict(old_host)))
        conn.execute(
            md.tables["runs"]
            .insert()
            .values(host_fingerprint=old_host.fingerprint, **known("runs", run_values))
        )
        conn.execute(md.tables["tests"].insert().values(**known("tests", dataclasses.asdict(test))))
    engine.dispose()


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_migrates_an_old_database_keeping_its_rows(db_url: str, version: int) -> None:
    assert "sampler_interval_s" not in build_metadata(1).tables["tests"].c
    assert "host_id" not in build_metadata(2).tables["runs"].c
    assert "samples" not in build_metadata(3).tables["tests"].c
    assert "gpu_p50_ms" not in build_metadata(5).tables["tests"].c
    old_host = host(hostname="first-a40")
    run = RunRecord(host=old_host, daemon_build="old-build", label="a40", extra={})
    old = make_test(run.run_id, sampler_interval_s=0.1 if version > 1 else None)
    write_old(create_engine(db_url), version, old_host, run, old)

    with ResultsDB(db_url) as db:
        with db.engine.connect() as conn:
            assert schema_version(conn) == SCHEMA_VERSION == 7
            runs = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
        assert {"hostname", "host_id"} <= runs
        (row,) = db.rows()
        assert row.test == old  # the warm-up peak was not measured then: None, not 0
        assert (row.test.warmup_rss_peak_bytes, row.test.lowmem_warmup) == (None, None)
        assert row.run == run  # its hostname came over from the hosts table; no machine id
        assert (row.run.host.hostname, row.run.host_id) == ("first-a40", "")
        twin = RunRecord(host=host(hostname="second-a40"), daemon_build="new", label="a40-2", host_id="22990")
        db.start_run(twin)
        samples = {"latency_s": [88.25, 97.5], "wave_s": [88.3, 97.6], "wave_size": [1, 1]}
        db.record_test(
            make_test(
                twin.run_id, "new", warmup_rss_peak_bytes=230 * GIB, lowmem_warmup=False, samples=samples
            )
        )
        rows = db.rows()
        assert [(r.run.host.hostname, r.run.host_id) for r in rows] == [
            ("first-a40", ""),
            ("second-a40", "22990"),
        ]
        assert [r.test.warmup_rss_peak_bytes for r in rows] == [None, 230 * GIB]
        assert [r.test.samples for r in rows] == [None, samples], "no samples before v4: None, not empty"
        assert rows[0].test.gpu_p50_ms is None, "no stage figures before v6"
        assert (rows[0].test.figures, rows[0].run.machine_build) == (None, None), (
            "nor whole figures before v7"
        )
        assert migrate(db.engine) == SCHEMA_VERSION  # a second pass changes nothing


def test_refuses_a_newer_schema(db_url: str) -> None:
    with ResultsDB(db_url) as db, db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE schema_version SET version = 99"))
    with pytest.raises(RuntimeError, match="schema version 99, newer than this pytest-cuzk understands"):
        ResultsDB(db_url)


def test_a_refused_database_is_left_with_no_connection_open(pg_server: pg.PostgresServer) -> None:
    """No one can close a ResultsDB whose __init__ raised: it closes its own pool first."""
    url = pg_server.create_database()
    with ResultsDB(url) as db, db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE schema_version SET version = 99"))
    with pytest.raises(RuntimeError, match="newer than this pytest-cuzk understands") as refused:
        ResultsDB(url)
    admin = create_engine(pg_server.url())
    with admin.connect() as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE datname = :name"
        left = conn.execute(sa.text(query), {"name": sa.make_url(url).database}).scalar()
    admin.dispose()
    assert left == 0, f"{left} connection(s) left open by {refused.value!r}"  # the traceback holds it


def test_round_trip_and_filters(db_url: str) -> None:
    other = host(gpu_models=["NVIDIA GeForce RTX 4090"], gpu_count=1, ram_bytes=128 * GIB, hostname="box")
    with ResultsDB(db_url) as db:
        a = RunRecord(host=host(), daemon_build="sha256:aaaa", label="a40", batch_size=2, concurrency=1,
                      preset="default", extra={"mode": "attach"})  # fmt: skip
        b = RunRecord(host=other, daemon_build="sha256:bbbb", label="4090")
        c = RunRecord(host=host(hostname="twin"), daemon_build="sha256:bbbb", label="a40-twin", host_id="7")
        for run in (a, b, c):
            db.start_run(run)
        assert db.run_finished_at(a.run_id) is None
        tests = [make_test(a.run_id), make_test(b.run_id, kind="snap", vram_peak_bytes=None, cold_start={})]
        tests.append(make_test(c.run_id, warmup_rss_peak_bytes=250 * GIB, lowmem_warmup=True))
        for t in tests:
            db.record_test(t)
        db.finish_run(a.run_id)

        rows = db.rows()
        assert [r.test for r in rows] == tests
        assert rows[0].run == a and rows[0].run.host == host()
        assert db.run_finished_at(a.run_id) is not None
        assert [r.test.kind for r in db.rows(kind="snap")] == ["snap"]
        # Twins share the hardware facts (the first writer's) and keep their own name and machine id.
        assert rows[2].run == c and rows[2].run.host.hostname == "twin"
        assert rows[2].run.host.fingerprint == rows[0].run.host.fingerprint
        assert [r.run.label for r in db.rows(build="sha256:bbbb")] == ["4090", "a40-twin"]
        assert [r.run.label for r in db.rows(host="4090")] == ["4090"]
        assert [r.run.label for r in db.rows(host=other.fingerprint[:6])] == ["4090"]
        assert [(build, n) for build, _, n in db.builds()] == [("sha256:aaaa", 1), ("sha256:bbbb", 2)]
        with pytest.raises(KeyError, match="no run 'nope'"):
            db.finish_run("nope")


def test_fingerprint_ignores_hostname_but_not_hardware() -> None:
    assert host(hostname="x").fingerprint == host(hostname="y").fingerprint
    assert host(ram_bytes=256 * GIB).fingerprint != host().fingerprint
    assert host(driver="560.1").fingerprint != host().fingerprint


def test_urls_users_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgres://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url(str(tmp_path / "r.db")).database == str(tmp_path / "r.db")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert default_url() == f"sqlite:///{tmp_path / 'xdg' / 'pytest-cuzk' / 'results.db'}"
    with pytest.raises(ValueError, match="use a sqlite:/// path or a postgresql:// URL"):
        normalize_url("mysql://u@h/db")


def test_a_postgresql_url_without_its_driver_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_cuzk.fleet.cli import main

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where only pytest-cuzk is installed
    with pytest.raises(ValueError, match=r"pip install 'pytest-cuzk\[postgresql\]'"):
        normalize_url("postgresql://u@127.0.0.1/db")
    assert main(["hosts", "--db", "postgres://u@127.0.0.1/db"]) == 2
    assert "needs the psycopg driver" in capsys.readouterr().err


@pytest.mark.e2e  # writers in subprocesses
def test_concurrent_writers_from_two_processes(db_url: str) -> None:
    with spawn_writer(db_url, "w1", 25) as w1, spawn_writer(db_url, "w2", 25) as w2:
        for w in (w1, w2):
            w.communicate(timeout=60)
            assert w.returncode == 0
    with ResultsDB(db_url) as db:
        rows = db.rows()
    assert len(rows) == 50
    assert {r.run.label for r in rows} == {"w1", "w2"}
    assert len({r.run.host.fingerprint for r in rows}) == 1
    for label in ("w1", "w2"):
        assert sorted(r.test.proofs_ok for r in rows if r.run.label == label) == list(range(25))


@pytest.mark.e2e  # a writer in a subprocess, killed
def test_killed_run_keeps_whole_rows_only(db_url: str) -> None:
    with spawn_writer(db_url, "doomed", -1) as writer:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "started\n"
        committed = 0
        while committed < 20:
            committed = int(writer.stdout.readline())
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=10)
    with ResultsDB(db_url) as db:
        rows = db.rows()
        assert db.run_finished_at(rows[0].run.run_id) is None
        db.start_run(RunRecord(host=host(), daemon_build="next"))  # the database still takes writes
    assert len(rows) >= committed
    for i, r in enumerate(rows):
        t = r.test
        assert (t.nodeid, t.proofs_ok, t.rss_peak_bytes) == (f"test_prove[{i}]", i, i)
        assert (t.p50_s, t.max_s, t.cold_start) == (float(i), float(i), {"ready": float(i)})
