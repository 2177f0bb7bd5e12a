"""What a finished case feeds: extra_info through the hook pair, user sinks, the summary, the database."""

from __future__ import annotations

import json

import pytest
from helpers import pg
from helpers.support import PROVE_SOURCE

from pytest_cuzk.backends.fake import FakeBehaviour
from pytest_cuzk.core import progress
from pytest_cuzk.measure.figures import Figures
from pytest_cuzk.results.database import ResultsDB, create_engine
from pytest_cuzk.results.rows import SAVED_RUN_ID

WINNING = ("-k", "winning", "--cuzk-batch-sizes=1")
pg_server = pg.pg_server


class Sink:
    """A user's plugin: shapes extra_info and collects every finished case."""

    def __init__(self) -> None:
        self.cases: list[tuple[str, Figures]] = []

    def pytest_cuzk_update_extra_info(self, item, figures, extra_info):
        extra_info["rack"] = "r7"

    def pytest_cuzk_case_finished(self, item, case, figures, result):
        self.cases.append((item.nodeid, figures))


def test_extra_info_is_the_figures_plus_what_hooks_add(fake_run, tmp_path):
    out = tmp_path / "bench.json"
    sink = Sink()
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *WINNING, f"--benchmark-json={out}", plugins=(sink,))
    result.assert_outcomes(passed=1)
    run = json.loads(out.read_text())
    (bench,) = run["benchmarks"]
    assert run["machine_info"]["cuzk"]["daemon_mode"] == "fake", "how the daemon was reached: not in the id"
    info = bench["extra_info"]
    assert info.pop("rack") == "r7"
    ((nodeid, figures),) = sink.cases
    assert nodeid.endswith("test_prove[winning-batch1-j1]")
    assert Figures.from_dict(info) == figures, "extra_info is the case's one figures record"
    assert (figures.proofs_ok, figures.proofs_failed) == (2, 0)
    assert bench["stats"]["rounds"] == 2, "one pedantic round per wave of one proof"


def test_a_generate_hook_replaces_the_extra_info(fake_run, tmp_path):
    class Own:
        @pytest.hookimpl(tryfirst=True)
        def pytest_cuzk_generate_extra_info(self, item, figures):
            return {"only": figures.kind}

    out = tmp_path / "bench.json"
    fake_run({"test_prove": PROVE_SOURCE}, *WINNING, f"--benchmark-json={out}", plugins=(Own(),))
    assert json.loads(out.read_text())["benchmarks"][0]["extra_info"] == {"only": "winning"}


def test_summary_has_a_row_per_case_cold_starts_and_counter_deltas(fake_run):
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, "-k", "winning or wpost", "--cuzk-batch-sizes=1")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*cuzk proving summary*",
            "test * kind * batch * j * ok * failed * p50 s * p90 s * p99 s * proofs/h * ±95% * RSS peak *",
            "test_prove[[]wpost-batch1-j1[]] * wpost * 1 * 1 * 2 * 0 *",
            "test_prove[[]winning-batch1-j1[]] * winning * 1 * 1 * 2 * 0 *",
            "cold start [[]local batch 1[]] *s: *",
            "daemon metrics over the run [[]local[]]:",
            '  cuzk_proofs_completed{proof_kind="window_post"}: +3',  # the warm-up proof and the case's two
        ]
    )


def test_the_results_database_gets_one_row_per_case(fake_run, tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    saved = tmp_path / "bench.json"
    args = ("-k", "winning or wpost", f"--cuzk-results-db={url}", f"--benchmark-json={saved}")
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args)
    result.assert_outcomes(passed=2)
    with ResultsDB(url) as db:
        rows = db.rows()
        assert sorted(r.test.kind for r in rows) == ["winning", "wpost"]
        assert all(r.test.proofs_ok == 2 and r.run.daemon_build == "fake daemon" for r in rows)
        assert len({r.run.run_id for r in rows}) == 1
        assert db.run_finished_at(rows[0].run.run_id) is not None, "a run that ended is marked finished"
    # What the saved-baseline gate reads of a recorded run: the build as machine info names it, a
    # lone daemon, the figures the saved case holds, and the saved case naming the run.
    machine = json.loads(saved.read_text())["machine_info"]["cuzk"]
    assert {(r.run.machine_build, r.run.daemons) for r in rows} == {(machine["daemon"], 1)}
    benches = {b["fullname"]: b["extra_info"] for b in json.loads(saved.read_text())["benchmarks"]}
    for row in rows:
        extra = benches[row.test.nodeid]
        assert extra[SAVED_RUN_ID] == row.run.run_id
        assert row.test.figures is not None
        assert Figures.from_dict({**row.test.figures, "samples": row.test.samples}) == Figures.from_dict(
            extra
        )


def test_a_results_database_file_that_is_no_database_stops_the_run_before_any_proof(fake_run, tmp_path):
    garbage = tmp_path / "results.db"
    garbage.write_bytes(b"not a database, " * 100)
    result, daemons = fake_run({"test_prove": PROVE_SOURCE}, *WINNING, f"--cuzk-results-db={garbage}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: cannot open the results database {garbage}: file is not a database; check the URL*"]
    )
    assert daemons[0].proofs == 0, "nothing was proved for records that would go nowhere"
    assert garbage.read_bytes() == b"not a database, " * 100, "the file is left as it was"


def test_a_database_that_goes_away_mid_run_fails_each_case_masking_the_dsn(fake_run, pg_server):
    url = pg_server.create_database()
    name = url.partition("?")[0].rpartition("/")[2]
    planted = url.replace("postgresql://cuzk@", "postgresql://cuzk:Pl4nted-s3cret@")  # trust: never sent

    class DropsTheDatabase:
        """The server loses the database after the run started: as a fleet's server restored from a dump."""

        def pytest_runtest_setup(self, item):
            admin = create_engine(pg_server.url())
            with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.dispose()

    args = (*WINNING, f"--cuzk-results-db={planted}")
    result, daemons = fake_run({"test_prove": PROVE_SOURCE}, *args, plugins=(DropsTheDatabase(),))
    result.assert_outcomes(failed=1)
    text = result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"*cannot record in the results database postgresql://cuzk:***@/{name}*"])
    assert f'database "{name}" does not exist' in text, "the server's own words"
    assert "Pl4nted-s3cret" not in text
    assert daemons[0].proofs > 0 and "cuzk proving summary" in text, "the figures are still shown"


def test_a_failing_sink_does_not_stop_the_gates_or_the_summary(fake_run):
    class Broken:
        def pytest_cuzk_case_finished(self, item, case, figures, result):
            raise RuntimeError("dashboard down")

    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *WINNING, plugins=(Broken(),))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: dashboard down*", "*cuzk proving summary*"])


def test_the_terminal_says_counts_and_seconds_as_people_write_them(fake_run):
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *WINNING, "--cuzk-proofs=1", "--cuzk-max-proofs=1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "cuzk: batch sizes 1, concurrency 1; per case at least 1 proof and at most 1, until the last 3 *",
            "test_prove[[]winning-batch1-j1[]]: 1 proof in 1 wave, 0 windows, *",
            "cold start [[]local batch 1[]] *.* s: start *.?? s, SRS load winning *.?? s, "
            "warm-up winning *.?? s, PCE none",  # the fake daemon's PCE is not checked
        ]
    )
    assert "{'" not in result.stdout.str(), "no Python dict shown"


@pytest.mark.parametrize(
    ("args", "extended"), [((), False), (("--benchmark-save=base",), True)], ids=["plain", "saved"]
)
def test_the_header_says_a_saved_case_may_measure_three_budgets_as_a_gated_one(fake_run, args, extended):
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *WINNING, "--cuzk-case-budget=2", *args)
    line = next(x for x in result.stdout.lines if x.startswith("cuzk: batch sizes"))
    assert ("or 2 s are spent (6 s while short of the gate's precision);" in line) == extended, line
    assert "or 2 s are spent" in line


def test_a_fleet_of_one_build_names_it_once(fake_run, tmp_path):
    page = tmp_path / "run.html"
    args = (*WINNING, f"--cuzk-html={page}")
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args, labels=("a", "b"), mode="attach")
    result.assert_outcomes(passed=2)
    builds = [line for line in result.outlines if line.startswith("daemon [")]
    assert builds == ["daemon [a], [b]: fake daemon (fake, on this host)"]
    assert page.read_text().count("· fake daemon") == 1, "the report's heading names the build once"


def test_a_progress_line_starts_on_a_line_of_its_own(fake_run, monkeypatch):
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)  # a CI log's line at every tick of a wait
    slow = {"winning": FakeBehaviour(delay_s=0.2)}
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *WINNING, behaviour=slow)
    result.assert_outcomes(passed=1)
    assert any(line.startswith("cuzk: ") for line in result.errlines), "progress lines were written"
    assert "test_prove.py" in [line.rstrip() for line in result.outlines], (
        "pytest's line of the file's results was ended before them, not left open to glue onto"
    )
