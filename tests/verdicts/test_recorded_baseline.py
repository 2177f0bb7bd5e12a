"""The saved-baseline gate counts the results database's runs of the baseline build, each once."""

from __future__ import annotations

from test_saved_gate import TEST, THROUGHPUT, _figures, _run

from pytest_cuzk.core.compat import SavedRun
from pytest_cuzk.measure.figures import Figures
from pytest_cuzk.results.rows import SAVED_RUN_ID, RecordedTest
from pytest_cuzk.verdicts.comparison import against_saved
from pytest_cuzk.verdicts.runspread import saved_runs


def _named(run: SavedRun, run_id: str) -> SavedRun:
    """A saved run whose case names its recorded run, as one saved by a run that records."""
    (bench,) = run.data["benchmarks"]
    bench["extra_info"][SAVED_RUN_ID] = run_id
    return run


def _row(run_id: str, figures: Figures, build: str = "A", host: str = "h1", test: str = TEST) -> RecordedTest:
    return RecordedTest(run_id, test, build, host, figures.to_dict())


class Database:
    """The results database's answer, and what the gate asked it."""

    def __init__(self, *rows: RecordedTest) -> None:
        self.rows = rows
        self.asked: list[tuple[str, str]] = []

    def __call__(self, nodeid: str, host: str) -> list[RecordedTest]:
        self.asked.append((nodeid, host))
        return list(self.rows)


def test_the_builds_recorded_runs_join_its_saved_ones_and_other_builds_join_the_hosts_spread():
    saved = [_named(_run(_figures(25.0, seed=1), 1), "r1"), _run(_figures(25.5, seed=2), 2)]
    db = Database(
        _row("r2", _figures(24.5, seed=3)),
        _row("r3", _figures(26.0, seed=4)),
        _row("b1", _figures(20.0, seed=5), build="B"),
        _row("b2", _figures(20.4, seed=6), build="B"),
        _row("elsewhere", _figures(50.0, seed=7), host="h2"),
        _row("another test", _figures(50.0, seed=8), test="other"),
    )
    found = saved_runs(saved, saved[0], TEST, db)
    assert found is not None and db.asked == [(TEST, "h1")]
    assert [run.recorded for run in found.mine] == [False, False, True, True]
    assert [[run.recorded for run in group] for group in found.others] == [[True, True]]
    rates = [3600 / s for s in (25.0, 25.5, 24.5, 26.0)]
    assert found.value(THROUGHPUT) is not None
    assert abs(found.value(THROUGHPUT) - sum(rates) / 4) < 2, "the mean of all four runs of the build"
    spread = found.spread(THROUGHPUT)
    assert (spread.source, spread.runs, spread.builds, spread.recorded) == ("host", 6, 2, 4)
    assert spread.describe().endswith(
        "pooled over 6 runs of 2 builds on this host (2 saved, 4 in the results database)"
    )


def test_a_run_both_saved_and_recorded_counts_once():
    saved = [_named(_run(_figures(25.0, seed=1), 1), "r1"), _named(_run(_figures(25.2, seed=2), 2), "r2")]
    db = Database(
        _row("r1", _figures(25.0, seed=1)),
        _row("r2", _figures(25.2, seed=2)),
        _row("r3", _figures(24.8, seed=3)),
    )
    found = saved_runs(saved, saved[0], TEST, db)
    assert found is not None
    spread = found.spread(THROUGHPUT)
    assert (len(found.mine), spread.source, spread.recorded) == (3, "build", 1)
    assert spread.describe() == (
        f"run-to-run spread CV {spread.cv:.1%} over 3 runs of this build on this host "
        "(2 saved, 1 in the results database)"
    )
    change = against_saved(THROUGHPUT, found, _figures(25.1, seed=9), 5.0)
    assert "(2 saved, 1 in the results database)" in change.sentence()
    assert "(mean of 3 runs)" in change.sentence()


def test_recorded_runs_give_the_spread_degrees_of_freedom_one_saved_run_cannot():
    saved = [_run(_figures(25.0, seed=1), 1)]
    alone = saved_runs(saved, saved[0], TEST)
    assert alone is not None and alone.spread(THROUGHPUT).source == "prior"
    paces = (25.3, 24.7, 25.1, 24.9, 25.2, 24.8)
    db = Database(*(_row(f"r{i}", _figures(p, seed=10 + i)) for i, p in enumerate(paces)))
    found = saved_runs(saved, saved[0], TEST, db)
    assert found is not None
    spread = found.spread(THROUGHPUT)
    assert (spread.source, spread.df, spread.recorded) == ("build", 6, 6)
    assert spread.half_width_pct(7) < alone.spread(THROUGHPUT).half_width_pct(1) / 5
    slower = _figures(25.0 * 1.25, seed=20, jitter=0.01)
    assert against_saved(THROUGHPUT, alone, slower, 5.0).verdict == "undecided", "the prior leaves it open"
    assert against_saved(THROUGHPUT, found, slower, 5.0).verdict == "regressed", "the host's runs decide it"


def test_a_recorded_row_that_is_no_record_adds_nothing():
    saved = [_run(_figures(25.0, seed=1), 1)]
    broken = RecordedTest("r2", TEST, "A", "h1", {"test": "x", "memory": "not a report"})
    found = saved_runs(saved, saved[0], TEST, Database(broken, _row("r3", _figures(25.1, seed=2))))
    assert found is not None and [run.recorded for run in found.mine] == [False, True]


def test_a_baseline_saved_without_pytest_cuzks_machine_info_asks_the_database_nothing():
    bare = SavedRun(
        "/storage/0001_old.json", {"benchmarks": [{"fullname": TEST, "extra_info": _figures().to_dict()}]}
    )
    db = Database(_row("r1", _figures(25.0)))
    found = saved_runs([bare], bare, TEST, db)
    assert found is not None and len(found.mine) == 1 and db.asked == []
