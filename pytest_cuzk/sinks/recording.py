"""The results-database sink: one run per daemon, one row per finished suite case.

Each row is written in its own transaction when its test ends, so an interrupted run keeps
every finished test; its runs are left unfinished, as the database expects. SQLAlchemy is
imported only by runs that record.

A case's ``extra_info`` names its run (``SAVED_RUN_ID``), so a run both saved by pytest-benchmark
and recorded here counts once where the saved-baseline gate reads both (``recorded``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

from pytest_cuzk.backends.choice import AB_LABEL
from pytest_cuzk.backends.protocol import DaemonBackend
from pytest_cuzk.config.settings import Settings
from pytest_cuzk.config.values import daemon_value
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.measure.figures import METRICS, Figures
from pytest_cuzk.results.rows import SAVED_RUN_ID, RecordedTest, RunRecord, TestRecord
from pytest_cuzk.vocab.redact import redact
from pytest_cuzk.vocab.units import plural

if TYPE_CHECKING:
    from pytest_cuzk.results.database import ResultsDB
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult

__all__ = ["Recorder"]


class Recorder:
    """Records a session's suite cases in the database at ``url`` (``default``: the SQLite file)."""

    def __init__(
        self,
        settings: Settings,
        worker: str,
        backend_for: Callable[[str], DaemonBackend],
        daemons: Callable[[], int],
    ) -> None:
        """``daemons``: how many daemons the session runs (an A/B control daemon among them)."""
        assert settings.results_db is not None
        self.url = None if settings.results_db == "default" else settings.results_db
        self.settings = settings
        self.worker = worker
        self.backend_for = backend_for
        self.daemons = daemons
        self.db: ResultsDB | None = None
        self.ids: dict[str, str] = {}  # each daemon's run id, by label, named at its first case
        self.runs: dict[str, str] = {}  # the runs written to the database, by label
        self.interrupted = False

    def run_id(self, label: str) -> str:
        """The daemon's run, named before it is written, so a saved case can name it too."""
        return self.ids.setdefault(label, str(uuid.uuid4()))

    def pytest_cuzk_update_extra_info(
        self, item: pytest.Item, figures: object, extra_info: dict[str, Any]
    ) -> None:
        """A saved case names its recorded run: the gate then counts it once, not twice."""
        if isinstance(figures, Figures):
            extra_info[SAVED_RUN_ID] = self.run_id(figures.label)

    def recorded(self, nodeid: str, host: str) -> list[RecordedTest]:
        """``nodeid``'s recorded runs on ``host`` but this session's; none from a database it cannot read."""
        from pytest_cuzk.results.recorded import recorded_tests

        unreadable: tuple[type[Exception], ...] = (*_db_errors(), ValueError, RuntimeError)  # a newer schema
        try:
            return recorded_tests(self._open(), nodeid, host, exclude=set(self.ids.values()))
        except unreadable:
            return []

    def check(self) -> None:
        """Open the database before any proof: one that cannot be reached stops the run now.

        Found only when the first case ends, it would fail every case after its proofs: an hour
        of proving whose records go nowhere.
        """
        with self._mapped("open"):
            self._open()

    @contextmanager
    def _mapped(self, what: str) -> Iterator[None]:
        """The one place a database error becomes ours, its DSN's password masked."""
        try:
            yield
        except _db_errors() as exc:
            # Not chained: SQLAlchemy's frames and message carry the DSN with its password.
            where = redact(self.url or "default")
            fix = "check the URL or path and that its server answers, or leave --cuzk-results-db out"
            why = redact(" ".join(str(getattr(exc, "orig", None) or exc).split()))  # the driver's words
            raise CuzkError(f"cannot {what} the results database {where}: {why}; {fix}") from None

    def _open(self) -> ResultsDB:
        if self.db is None:
            from pytest_cuzk.results.database import ResultsDB

            self.db = ResultsDB(self.url)
        return self.db

    def pytest_cuzk_case_finished(
        self, item: pytest.Item, case: Case, figures: Figures, result: CaseResult
    ) -> None:
        """Write one finished case, an A/B case's control too; a database error masks the DSN's password.

        The control build's figures go in its own run, under its own build, like any build's; the
        candidate's row carries the paired change.
        """
        with self._mapped("record in"):
            pair = None
            if figures.ab is not None:
                ab = figures.ab
                self._record(item, case, self.backend_for(AB_LABEL), ab.control)
                pair = ab.to_dict(with_control=False)
            self._record(item, case, self.backend_for(case.label), figures, pair)

    def _record(
        self,
        item: pytest.Item,
        case: Case,
        backend: DaemonBackend,
        figures: Figures,
        ab: dict[str, Any] | None = None,
    ) -> None:
        db = self._open()
        if backend.label not in self.runs:
            self.runs[backend.label] = db.start_run(self.run_record(backend))
        cold = backend.state.cold[-1] if backend.state.cold else None
        kind = case.kind.name
        db.record_test(
            TestRecord(
                run_id=self.runs[backend.label],
                nodeid=item.nodeid,
                kind=kind,
                batch_size=case.batch_size,
                concurrency=case.concurrency,
                proofs_ok=figures.proofs_ok,
                proofs_failed=figures.proofs_failed,
                **{m.column: m.value(figures) for m in METRICS.values()},  # type: ignore[arg-type]
                cold_start={
                    "start_s": cold.start_s if cold else 0.0,
                    "srs_load_s": cold.srs_load_s.get(kind, 0.0) if cold else 0.0,
                    "warmup_s": cold.warmup_s.get(kind, 0.0) if cold else 0.0,
                    "pce_s": cold.pce_s.get(kind, 0.0) if cold else 0.0,
                },
                sampler_interval_s=figures.memory.interval_s if figures.memory else None,
                warmup_rss_peak_bytes=cold.warmup_rss_peak_bytes.get(kind) if cold else None,
                lowmem_warmup=cold.lowmem_warmup if cold else None,
                samples=figures.samples.to_dict(),
                label=backend.label,
                ab=ab,
                figures={k: v for k, v in figures.to_dict().items() if k not in ("samples", "ab")},
            )
        )

    def run_record(self, backend: DaemonBackend) -> RunRecord:
        """A daemon's run: its host and the identity it is rented by, its build, its configuration."""
        s = self.settings
        return RunRecord(
            host=backend.host_record(),
            daemon_build=backend.profile().identity(),
            label=backend.label,
            host_id=daemon_value(s.host_ids, backend.address) or "",
            batch_size=s.batch_sizes[0] if len(s.batch_sizes) == 1 else None,
            concurrency=max(s.concurrency),
            preset=backend.profile().preset(),
            extra={"worker": self.worker, "mode": backend.mode, "daemon_config": _config_keys(backend)},
            machine_build=backend.profile().build(),
            daemons=self.daemons(),
            run_id=self.run_id(backend.label),
        )

    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Where the run went: a run recorded in the database is one ``cuzk-perf`` can read back."""
        if self.runs:
            from pytest_cuzk.results.database import default_url

            where = redact(self.url) if self.url else f"default ({default_url()})"
            runs = plural(len(self.runs), "daemon run")
            terminalreporter.write_line(f"cuzk: {runs} written to the results database {where}")

    def pytest_unconfigure(self) -> None:
        """Mark the runs finished (unless interrupted) and close the database."""
        if self.db is None:
            return
        try:
            if not self.interrupted:
                for run_id in self.runs.values():
                    self.db.finish_run(run_id)
        finally:
            self.db.close()
            self.db = None


def _db_errors() -> tuple[type[Exception], ...]:
    """What a database that is down, or a file that is no database, raises (SQLite's own on opening one)."""
    import sqlite3

    from sqlalchemy.exc import SQLAlchemyError

    return SQLAlchemyError, sqlite3.Error, OSError


def _config_keys(backend: DaemonBackend) -> dict[str, str] | None:
    """The daemon's config keys (masked), so two runs of one binary can say which keys differ."""
    config = backend.profile().config()
    return None if config is None else config.keys
