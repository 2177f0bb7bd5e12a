"""The results database: every measured test of every run, per host and daemon build.

Why a database and not pytest-benchmark's JSON files: hardware specs do not predict proving
throughput, so a fleet operator needs measured figures per host over many runs and builds, from
many machines at once. SQLAlchemy Core keeps one code path for a local SQLite file and a fleet's
shared PostgreSQL.

Default location: ``results.db`` in the per-user data directory (``host.paths``:
``$XDG_DATA_HOME/pytest-cuzk``, ``~/.local/share/pytest-cuzk`` when unset). A URL
``postgresql://user@host/db`` selects PostgreSQL through psycopg 3 (``pip install
'pytest-cuzk[postgresql]'``); a bare path is a SQLite file.

Writes are short transactions: ``record_test`` writes one whole row when a test ends, so an
interrupted run keeps every finished test and never a half-written one. Several pytest-xdist
workers may write at once (SQLite: WAL, a busy timeout and ``BEGIN IMMEDIATE``; PostgreSQL:
ordinary transactions, and an advisory lock around schema creation and migration).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from filelock import FileLock
from sqlalchemy.dialects import postgresql, sqlite

from pytest_cuzk.host.paths import user_data_dir
from pytest_cuzk.results.rows import HostRecord, ResultRow, RunRecord, TestRecord
from pytest_cuzk.vocab.redact import redact

__all__ = [
    "SCHEMA_VERSION",
    "ResultsDB",
    "build_metadata",
    "default_url",
    "migrate",
    "normalize_url",
    "schema_version",
]

SCHEMA_VERSION = 7
SQLITE_BUSY_TIMEOUT_MS = 60_000
PG_CONNECT_TIMEOUT_S = 10
_PG_LOCK_KEY = 0x6375_7A6B  # "cuzk": serializes schema changes between fleet machines


def default_url() -> str:
    """SQLite file in the platform's per-user data directory."""
    return f"sqlite:///{user_data_dir() / 'results.db'}"


def normalize_url(url: str | None) -> sa.URL:
    """Map the forms users type (bare path, ``postgresql://``, ``postgres://``) onto a driver URL."""
    if not url:
        url = default_url()
    elif "://" not in url:
        url = f"sqlite:///{Path(url).expanduser().resolve()}"
    parsed = sa.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        if importlib.util.find_spec("psycopg") is None:  # an optional dependency: say how to get it
            hint = "pip install 'pytest-cuzk[postgresql]'"
            raise ValueError(redact(f"results database URL {url!r} needs the psycopg driver: {hint}"))
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        use = "use a sqlite:/// path or a postgresql:// URL"
        raise ValueError(redact(f"results database URL {url!r}: {use}"))
    return parsed


# --------------------------------------------------------------------------- schema


def _since(version: int) -> dict[str, int]:
    return {"since": version}


def build_metadata(version: int = SCHEMA_VERSION) -> sa.MetaData:
    """Build the tables as they were at ``version``; a column tagged ``since`` appeared then."""
    md = sa.MetaData()
    sa.Table("schema_version", md, sa.Column("version", sa.Integer, nullable=False))
    tests: list[sa.Column[Any]] = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(36), sa.ForeignKey("runs.run_id"), nullable=False, index=True),
        sa.Column("nodeid", sa.Text, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False, index=True),
        sa.Column("batch_size", sa.Integer, nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("label", sa.Text, nullable=False, default=""),
        sa.Column("proofs_ok", sa.Integer, nullable=False),
        sa.Column("proofs_failed", sa.Integer, nullable=False),
        *(sa.Column(n, sa.Float) for n in ("p50_s", "p90_s", "max_s", "proofs_per_hour")),
        sa.Column("rss_peak_bytes", sa.BigInteger),
        sa.Column("vram_peak_bytes", sa.BigInteger),
        sa.Column("cold_start", sa.JSON),
        # v2: a 1 s sampler misses peaks a 100 ms one catches.
        sa.Column("sampler_interval_s", sa.Float, info=_since(2)),
        # v3: the first PCE extraction, not the proofs, is what OOM-kills a host with too little RAM.
        sa.Column("warmup_rss_peak_bytes", sa.BigInteger, info=_since(3)),
        sa.Column("lowmem_warmup", sa.Boolean, info=_since(3)),
        # v4: a comparison of two builds tests samples, not two summaries.
        sa.Column("p99_s", sa.Float, info=_since(4)),
        sa.Column("samples", sa.JSON, info=_since(4)),
        # v5: an A/B case's paired change against the control build measured beside it.
        sa.Column("ab", sa.JSON, info=_since(5)),
        # v6: the stage figures, so a GPU-kernel regression that CPU drift hides in throughput is gated.
        *(
            sa.Column(n, sa.Float, info=_since(6))
            for n in ("gpu_p50_ms", "synthesis_p50_ms", "queue_wait_p50_ms")
        ),
        # v7: the case's figures whole, so the saved-baseline gate counts a recorded run as a saved one.
        sa.Column("figures", sa.JSON, info=_since(7)),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
    ]
    runs: list[sa.Column[Any]] = [
        sa.Column("run_id", sa.String(36), primary_key=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("host_fingerprint", sa.String(64), sa.ForeignKey("hosts.fingerprint"), nullable=False),
        sa.Column("daemon_build", sa.Text, nullable=False, index=True),
        sa.Column("label", sa.Text, nullable=False, default=""),
        # v3: the identity a host is rented by, so the next offer of the same machine matches.
        *(
            sa.Column(n, sa.Text, nullable=False, default="", server_default="", info=_since(3))
            for n in ("hostname", "host_id")
        ),
        sa.Column("batch_size", sa.Integer),
        sa.Column("concurrency", sa.Integer),
        sa.Column("preset", sa.Text),
        sa.Column("extra", sa.JSON),
        # v7: the build as machine info names it, and whether its daemon was measured alone.
        sa.Column("machine_build", sa.Text, info=_since(7)),
        sa.Column("daemons", sa.Integer, info=_since(7)),
    ]
    sa.Table(
        "hosts",
        md,
        sa.Column("fingerprint", sa.String(64), primary_key=True),
        sa.Column("gpu_models", sa.JSON, nullable=False),
        sa.Column("gpu_count", sa.Integer, nullable=False),
        sa.Column("vram_total_bytes", sa.BigInteger, nullable=False),
        sa.Column("cpu_model", sa.Text, nullable=False),
        sa.Column("cpu_cores", sa.Integer, nullable=False),
        sa.Column("ram_bytes", sa.BigInteger, nullable=False),
        # hostname: the first run's; each run keeps its own since v3
        *(sa.Column(n, sa.Text, nullable=False, default="") for n in ("driver", "cuda", "hostname")),
    )
    sa.Table("runs", md, *[c for c in runs if c.info.get("since", 1) <= version])
    sa.Table("tests", md, *[c for c in tests if c.info.get("since", 1) <= version])
    return md


def _add_columns(conn: sa.Connection, version: int) -> None:
    """Add the columns tagged ``since=version``, as ``build_metadata`` declares them."""
    for table in build_metadata(version).tables.values():
        for column in table.columns:
            if column.info.get("since") == version:
                ddl = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
                conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {ddl}"))


def _add_host_identity(conn: sa.Connection) -> None:
    """v3: runs keep their hostname and provider machine id; tests their warm-up peak."""
    _add_columns(conn, 3)
    hosts = sa.table("hosts", sa.column("fingerprint"), sa.column("hostname"))
    runs = sa.table("runs", sa.column("host_fingerprint"), sa.column("hostname"))
    of_run = sa.select(hosts.c.hostname).where(hosts.c.fingerprint == runs.c.host_fingerprint)
    conn.execute(runs.update().values(hostname=of_run.scalar_subquery()))


MIGRATIONS: dict[int, Callable[[sa.Connection], None]] = {
    2: lambda conn: _add_columns(conn, 2),
    3: _add_host_identity,
    4: lambda conn: _add_columns(conn, 4),
    5: lambda conn: _add_columns(conn, 5),
    6: lambda conn: _add_columns(conn, 6),
    7: lambda conn: _add_columns(conn, 7),
}


def schema_version(conn: sa.Connection) -> int | None:
    """Return the stored version; None for an empty database."""
    if not sa.inspect(conn).has_table("schema_version"):
        return None
    return conn.execute(sa.text("SELECT max(version) FROM schema_version")).scalar()


def migrate(engine: sa.Engine) -> int:
    """Create the schema or upgrade it step by step to ``SCHEMA_VERSION``; safe to race.

    The whole check-and-change runs in one transaction under a database-wide lock, so of several
    workers starting together one creates or migrates and the others see the result.
    """
    with _write(engine) as conn:
        current = schema_version(conn)
        if current is None:
            build_metadata().create_all(conn)
            conn.execute(sa.text("INSERT INTO schema_version (version) VALUES (:v)"), {"v": SCHEMA_VERSION})
            return SCHEMA_VERSION
        if current > SCHEMA_VERSION:
            raise RuntimeError(
                f"results database {engine.url.render_as_string()} has schema version {current}, newer "
                f"than this pytest-cuzk understands ({SCHEMA_VERSION}): upgrade pytest-cuzk"
            )
        for step in range(current + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[step](conn)
        conn.execute(sa.text("UPDATE schema_version SET version = :v"), {"v": SCHEMA_VERSION})
        return SCHEMA_VERSION


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # Take transaction control from the driver so BEGIN IMMEDIATE can be issued (see _sqlite_begin).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


def _sqlite_begin(conn: sa.Connection) -> None:
    # Take the write lock up front: a deferred transaction that reads and then writes can fail with
    # SQLITE_BUSY at once, without waiting, when another worker committed in between.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def create_engine(url: str | sa.URL | None) -> sa.Engine:
    """Make an engine for ``url`` with the settings concurrent writers need."""
    parsed = url if isinstance(url, sa.URL) else normalize_url(url)
    if parsed.get_backend_name() != "sqlite":
        # libpq waits as long as the kernel retries a SYN (minutes) for a host that drops packets
        timeout = {} if "connect_timeout" in parsed.query else {"connect_timeout": PG_CONNECT_TIMEOUT_S}
        return sa.create_engine(parsed, pool_pre_ping=True, connect_args=timeout)
    engine = sa.create_engine(parsed, poolclass=sa.pool.NullPool)
    sa.event.listen(engine, "connect", _sqlite_connect)
    sa.event.listen(engine, "begin", _sqlite_begin)
    if parsed.database and parsed.database != ":memory:":
        _enable_wal(engine, Path(parsed.database))
    return engine


def _enable_wal(engine: sa.Engine, path: Path) -> None:
    """Switch the file to WAL once (it persists), so readers never block the workers' writes.

    The switch needs an exclusive lock and SQLite fails it at once, without waiting, when another
    process is switching too, so processes opening a new file take turns through a file lock.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(path.name + ".lock"), timeout=SQLITE_BUSY_TIMEOUT_MS / 1000):
        raw = engine.raw_connection()  # outside any transaction, as the switch requires
        try:
            raw.cursor().execute("PRAGMA journal_mode = WAL")
        finally:
            raw.close()


@contextmanager
def _write(engine: sa.Engine) -> Iterator[sa.Connection]:
    """Open a transaction holding the schema lock (SQLite's write lock, a PostgreSQL advisory lock)."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        yield conn


_INSERT = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value


def _pick(row: sa.RowMapping, table: str, cls: type[Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {
        k[len(table) + 1 :]: v
        for k, v in row.items()
        if k.startswith(f"{table}_") and k[len(table) + 1 :] in names
    }


# --------------------------------------------------------------------------- database


class ResultsDB:
    """Open (creating or upgrading as needed) the results database at ``url``.

    ``create=False`` for a reader: a SQLite file that is not there is an error naming it, and
    nothing is made (a typo in a path must not become an empty database that answers "no data").
    """

    def __init__(self, url: str | None = None, create: bool = True) -> None:
        self.url = normalize_url(url)
        path = self.url.database if self.url.get_backend_name() == "sqlite" else None
        if not create and path and path != ":memory:" and not Path(path).is_file():
            raise FileNotFoundError(
                f"the results database {path} does not exist: check the path, or record runs into it "
                "first (pytest --cuzk-results-db=...)"
            )
        self.engine = create_engine(self.url)
        try:
            migrate(self.engine)
        except BaseException:  # refused or failed: no one can close a ResultsDB never made, so close it here
            self.engine.dispose()
            raise
        md = build_metadata()
        self._hosts, self._runs, self._tests = (md.tables[n] for n in ("hosts", "runs", "tests"))

    def __enter__(self) -> ResultsDB:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release pooled connections."""
        self.engine.dispose()

    def start_run(self, run: RunRecord) -> str:
        """Store the run and its host (first writer of a fingerprint wins); returns the run id."""
        with self.engine.begin() as conn:
            insert = _INSERT[conn.dialect.name]
            conn.execute(insert(self._hosts).values(**asdict(run.host)).on_conflict_do_nothing())  # type: ignore[attr-defined]
            values = {k: v for k, v in asdict(run).items() if k != "host"}
            conn.execute(
                self._runs.insert().values(
                    host_fingerprint=run.host.fingerprint, hostname=run.host.hostname, **values
                )
            )
        return run.run_id

    def record_test(self, test: TestRecord) -> None:
        """Write one finished test as one row in its own transaction."""
        with self.engine.begin() as conn:
            conn.execute(self._tests.insert().values(**asdict(test)))

    def finish_run(self, run_id: str, at: dt.datetime | None = None) -> None:
        """Mark the run complete; runs without it were interrupted (their tests are still whole)."""
        at = at or dt.datetime.now(dt.timezone.utc)
        with self.engine.begin() as conn:
            done = conn.execute(
                self._runs.update().where(self._runs.c.run_id == run_id).values(finished_at=at)
            )
            if done.rowcount != 1:
                raise KeyError(f"no run {run_id!r} in {self.url.render_as_string()}")

    def run_finished_at(self, run_id: str) -> dt.datetime | None:
        """When the run finished; None while it runs or when it was interrupted."""
        with self.engine.connect() as conn:
            q = sa.select(self._runs.c.finished_at).where(self._runs.c.run_id == run_id)
            return _utc(conn.execute(q).scalar())

    def rows(
        self, *, kind: str | None = None, build: str | None = None, host: str | None = None
    ) -> list[ResultRow]:
        """Return every test joined with its run and host, oldest first.

        ``host`` is a fingerprint prefix or a run label.
        """
        t, r, h = self._tests, self._runs, self._hosts
        q = (
            sa.select(t, r, h)
            .join_from(t, r, t.c.run_id == r.c.run_id)
            .join(h, r.c.host_fingerprint == h.c.fingerprint)
            .order_by(r.c.started_at, t.c.finished_at, t.c.id)
            .set_label_style(sa.LABEL_STYLE_TABLENAME_PLUS_COL)
        )
        if kind:
            q = q.where(t.c.kind == kind)
        if build:
            q = q.where(r.c.daemon_build == build)
        if host:
            q = q.where(sa.or_(r.c.host_fingerprint.startswith(host, autoescape=True), r.c.label == host))
        with self.engine.connect() as conn:
            return [self._row(m) for m in conn.execute(q).mappings()]

    @staticmethod
    def _row(m: sa.RowMapping) -> ResultRow:
        test = _pick(m, "tests", TestRecord)
        run = _pick(m, "runs", RunRecord)
        test.update(cold_start=test["cold_start"] or {}, finished_at=_utc(test["finished_at"]))
        run.update(extra=run["extra"] or {}, started_at=_utc(run["started_at"]))
        host = HostRecord(**(_pick(m, "hosts", HostRecord) | {"hostname": m["runs_hostname"]}))
        return ResultRow(TestRecord(**test), RunRecord(host=host, **run))

    def builds(self) -> list[tuple[str, dt.datetime, int]]:
        """(build, first seen, run count) for every daemon build, oldest first."""
        r = self._runs
        first = sa.func.min(r.c.started_at)
        q = sa.select(r.c.daemon_build, first, sa.func.count()).group_by(r.c.daemon_build).order_by(first)
        with self.engine.connect() as conn:
            return [(b, _utc(t) or t, n) for b, t, n in conn.execute(q)]
