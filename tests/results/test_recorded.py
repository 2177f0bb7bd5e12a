"""A test's recorded runs on one host, as the saved-baseline gate counts them: lone daemons' only."""

from __future__ import annotations

import pytest
from helpers import pg
from test_results import host, make_test, write_old

from pytest_cuzk.results.database import ResultsDB, create_engine
from pytest_cuzk.results.recorded import recorded_tests
from pytest_cuzk.results.rows import RecordedTest, RunRecord

db_url, pg_server = pg.db_url, pg.pg_server  # each test runs on SQLite and on PostgreSQL
NODEID = "test_prove.py::test_prove[porep-batch1-j1]"
SAMPLES = {"latency_s": [88.25, 97.5], "wave_s": [88.3, 97.6], "wave_size": [1, 1]}


def figures(rate: float) -> dict[str, object]:
    """A case's figures as the recorder stores them: ``to_dict`` less the samples, which have a column."""
    return {"test": "test_prove[porep-batch1-j1]", "throughput_proofs_per_hour": rate, "memory": None}


def record(
    db: ResultsDB, build: str, rate: float, *, daemons: int = 1, where: str = "", **test: object
) -> str:
    run = RunRecord(
        host=host(cpu_model=where) if where else host(),
        daemon_build=f"{build} prover=cpu",
        machine_build=build,
        daemons=daemons,
    )
    db.start_run(run)
    values: dict[str, object] = {"figures": figures(rate), "samples": SAMPLES, **test}
    db.record_test(make_test(run.run_id, values.pop("nodeid", NODEID), **values))  # type: ignore[arg-type]
    return run.run_id


def test_a_tests_lone_runs_on_its_host_are_read_back_with_their_figures_whole(db_url: str) -> None:
    with ResultsDB(db_url) as db:
        a1, a2, b1 = record(db, "A", 100.0), record(db, "A", 104.0), record(db, "B", 90.0)
        mine = record(db, "A", 95.0)  # the session reading them: its own row is not a baseline's run
        record(db, "A", 80.0, daemons=2)  # beside another daemon (an A/B run, or two daemons of a session)
        record(db, "A", 80.0, ab={"change": 0.1})  # an A/B case's row
        record(db, "A", 80.0, where="another host")
        record(db, "A", 80.0, nodeid="test_prove.py::test_prove[winning-batch1-j1]")
        record(db, "A", 80.0, figures=None)  # recorded before figures were kept whole
        found = recorded_tests(db, NODEID, host().fingerprint, exclude={mine})
    assert [(t.run_id, t.build) for t in found] == [(a1, "A"), (a2, "A"), (b1, "B")]
    assert found[0] == RecordedTest(
        a1, NODEID, "A", host().fingerprint, {**figures(100.0), "samples": SAMPLES}
    )


def test_an_old_database_is_migrated_and_its_rows_add_nothing_and_lose_nothing(db_url: str) -> None:
    old_run = RunRecord(host=host(), daemon_build="A", label="a40", extra={})
    write_old(create_engine(db_url), 6, host(), old_run, make_test(old_run.run_id, NODEID))
    with ResultsDB(db_url) as db:
        (row,) = db.rows()
        assert (row.run.machine_build, row.run.daemons, row.test.figures) == (None, None, None)
        assert recorded_tests(db, NODEID, host().fingerprint) == []
        new = record(db, "A", 100.0)
        assert [t.run_id for t in recorded_tests(db, NODEID, host().fingerprint)] == [new]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_row_whose_figures_are_not_a_record_is_left_out(db_url: str) -> None:
    with ResultsDB(db_url) as db:
        record(db, "A", 100.0, figures=[1, 2])
        assert recorded_tests(db, NODEID, host().fingerprint) == []
