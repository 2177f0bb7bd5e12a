"""The recorder as the saved-baseline gate's source: other sessions' runs, none from a broken database."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import HostRecord, RunRecord, TestRecord
from pytest_cuzk.sinks.recording import Recorder

NODEID = "test_prove.py::test_prove[porep-batch1-j1]"
HOST = HostRecord.of(
    gpu_models=[], gpu_count=0, vram_total_bytes=0, cpu_model="cpu", cpu_cores=2, ram_bytes=1
)


def _recorder(pytester: pytest.Pytester, url: str) -> Recorder:
    settings = resolve_settings(pytester.parseconfig(f"--cuzk-results-db={url}"))
    return Recorder(settings, "master", lambda label: pytest.fail("no daemon is asked for"), lambda: 1)


def _record(db: ResultsDB, run_id: str) -> None:
    db.start_run(RunRecord(host=HOST, daemon_build="A", machine_build="A", daemons=1, run_id=run_id))
    db.record_test(
        TestRecord(run_id, NODEID, "porep", 1, 1, 2, 0, 1.0, 1.0, 1.0, 3600.0, None, figures={"test": "t"})
    )


def test_the_sessions_own_runs_are_not_its_baseline(pytester: pytest.Pytester, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    recorder = _recorder(pytester, url)
    with ResultsDB(url) as db:
        _record(db, "an earlier session's")
        _record(db, recorder.run_id("local"))  # written when this session's case ended, before its gate
    try:
        assert [t.run_id for t in recorder.recorded(NODEID, HOST.fingerprint)] == ["an earlier session's"]
    finally:
        recorder.pytest_unconfigure()


def test_a_database_that_cannot_be_read_gives_no_runs(pytester: pytest.Pytester, tmp_path: Path) -> None:
    garbage = tmp_path / "results.db"
    garbage.write_bytes(b"not a database, " * 100)
    recorder = _recorder(pytester, f"sqlite:///{garbage}")
    assert recorder.recorded(NODEID, HOST.fingerprint) == []
