"""A real, throw-away PostgreSQL server for tests: Debian's binaries on a unix socket in a temp dir.

Why a real server: the results database must behave the same on a fleet's PostgreSQL as on SQLite
(transactions, concurrent writers, schema migration), and only a real server shows that.

The server listens on no TCP port (``listen_addresses=''``), only on a socket in its own temp dir,
trusts local connections and runs with fsync off (nothing here needs to survive a crash of the
host). ``initdb`` refuses to run as root, so as root the server runs as the ``postgres`` user the
Debian package creates, in a temp dir handed to that user. Tests skip, saying why, when the
server binaries (package ``postgresql``) or that user are missing.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

__all__ = ["PostgresServer", "db_url", "find_bindir", "pg_server"]

SUPERUSER = "cuzk"
START_TIMEOUT_S = 60


def find_bindir() -> Path | None:
    """Newest ``/usr/lib/postgresql/<v>/bin`` with initdb, else the one on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


class PostgresServer:
    """One server process; ``create_database()`` hands each test a database of its own."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="cuzk-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as: dict[str, Any] = {}
        self._names = itertools.count()
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bindir / tool), *args]
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=START_TIMEOUT_S, cwd=self.root, **self._as
        )
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{log}"
            )

    def start(self) -> None:
        """Initialise a cluster and start the server; returns once it accepts connections."""
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "--no-sync", "-E", "UTF8")
        opts = f"-k {self.root} -c listen_addresses='' -c fsync=off -c synchronous_commit=off"
        self._run("pg_ctl", "start", "-w", "-D", str(self.data), "-l", str(self.log), "-o", opts)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its files."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.data))
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        """Plain ``postgresql://`` URL (as a user types it) reaching ``database`` over the socket."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.root}"

    def create_database(self) -> str:
        """Create an empty database and return its URL."""
        name = f"t{os.getpid()}_{next(self._names)}"
        engine = sa.create_engine(self.url().replace("postgresql://", "postgresql+psycopg://"))
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        engine.dispose()
        return self.url(name)


_SERVER = pytest.StashKey[PostgresServer]()


@pytest.fixture(scope="session")
def pg_server(request: pytest.FixtureRequest) -> PostgresServer:
    """Start one server per pytest process (or skip, naming what is missing).

    Test modules import this fixture, which makes one fixture per module; the server is shared
    through the config stash so it starts once, and stops when pytest ends.
    """
    stash = request.config.stash
    if _SERVER in stash:
        return stash[_SERVER]
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found (install Debian's `postgresql` package)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and no `postgres` user to run the PostgreSQL server as")
    server = PostgresServer(bindir)
    request.config.add_cleanup(server.stop)
    server.start()
    stash[_SERVER] = server
    return server


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Run the test once on a fresh SQLite file and once on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'results.db'}"
    return request.getfixturevalue("pg_server").create_database()
