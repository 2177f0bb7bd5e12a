"""One number per figure in every ``cuzk-perf`` view: a run's recorded figure, or its pool's by one rule.

Three runs on one host: build A twice (a fast run and a slow one), build B once. Each view must
print B's recorded figures as stored, and A's pooled as every view pools runs: the median of the
runs' figures, the highest of their peaks and slowest proofs. So a pool's p90 never passes its max.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from helpers import pg
from helpers.htmltables import tables
from test_perf import GIB, T0, body, cells, perf, samples

from pytest_cuzk.fleet.cli import main
from pytest_cuzk.measure.figures import METRICS
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import HostRecord, RunRecord, TestRecord

db_url, pg_server = pg.db_url, pg.pg_server
HOST = HostRecord.of(
    gpu_models=["NVIDIA H200"], gpu_count=1, vram_total_bytes=141 * GIB, cpu_model="EPYC 9654",
    cpu_cores=16, ram_bytes=128 * GIB, driver="580.159", cuda="13.0", hostname="h200-a",
)  # fmt: skip
A, B = "sha256:aaaa0001", "sha256:bbbb0002"
# (build, day, proofs/h, p50 s, p90 s, max s, RSS peak GiB, VRAM peak GiB); A's second run is 5x slower
RUNS = [
    (A, 0, 2078.1, 1.00, 1.06, 1.12, 10, 20),
    (A, 1, 1863.1, 5.00, 5.20, 5.50, 12, 23),
    (B, 2, 700.0, 2.00, 2.10, 2.30, 11, 21),
]
# What every view prints of each build: B's run as recorded; A's two runs pooled (median, or the highest).
SHOWN = {
    A: {"throughput": 1970.6, "p50": 3.00, "p90": 3.13, "max": 5.50, "rss_peak": 12 * GIB},
    B: {"throughput": 700.0, "p50": 2.00, "p90": 2.10, "max": 2.30, "rss_peak": 11 * GIB},
}
SHOWN[A]["vram_peak"], SHOWN[B]["vram_peak"] = 23 * GIB, 21 * GIB
SPREAD = {A: "1863.1..2078.1", B: "700.0..700.0"}


@pytest.fixture
def runs(db_url: str) -> str:
    with ResultsDB(db_url) as db:
        for build, day, per_hour, p50, p90, slowest, rss, vram in RUNS:
            when = T0 + dt.timedelta(days=day)
            run = RunRecord(host=HOST, daemon_build=build, label="h200", started_at=when)
            db.start_run(run)
            db.record_test(TestRecord(
                run_id=run.run_id, nodeid="test_prove[porep-batch1-j1]", kind="porep", batch_size=1,
                concurrency=1, proofs_ok=20, proofs_failed=0, p50_s=p50, p90_s=p90, max_s=slowest,
                proofs_per_hour=per_hour, rss_peak_bytes=rss * GIB, vram_peak_bytes=vram * GIB, label="h200",
                samples=samples(per_hour, p50, seed=day),
            ))  # fmt: skip
            db.finish_run(run.run_id)
    return db_url


def shown(build: str, name: str) -> str:
    return METRICS[name].fmt(SHOWN[build][name])


def by_heading(out: str) -> list[dict[str, str]]:
    """The first table of ``out``, each row by its headings."""
    lines = out.splitlines()
    heads = cells(lines[next(i for i, line in enumerate(lines) if line.startswith("---")) - 1])
    return [dict(zip(heads, row, strict=True)) for row in body(out)]


def test_hosts_prints_the_best_builds_pooled_figure(runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = perf(capsys, runs, "hosts")
    assert code == 0
    (row,) = by_heading(out)
    assert (row["best/h"], row["spread/h"], row["runs"]) == (shown(A, "throughput"), SPREAD[A], "2")
    assert (row["best config"], row["best build"]) == ("batch1-j1", A)


def test_history_prints_each_builds_pooled_figures(runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = perf(capsys, runs, "history", "--kind", "porep")
    assert code == 0
    got = {row["build"]: row for row in by_heading(out)}
    assert sorted(got) == [A, B]
    for build, row in got.items():
        assert row["spread/h"] == SPREAD[build]
        for name in SHOWN[build]:
            assert row[METRICS[name].label] == shown(build, name), (build, name)
        assert float(row["p90 s"]) <= float(row["max s"])


def test_compare_prints_each_builds_pooled_figures(runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = perf(capsys, runs, "compare", A, B)
    assert code == 0
    got = {row["metric"]: row for row in by_heading(out.split("\n", 2)[2])}
    for name in SHOWN[A]:
        m = METRICS[name]
        assert (got[name]["A"], got[name]["B"]) == (m.show(SHOWN[A][name]), m.show(SHOWN[B][name])), name
    for side in "AB":
        assert float(got["p90"][side].split()[0]) <= float(got["max"][side].split()[0]), side
    change = (SHOWN[B]["throughput"] - SHOWN[A]["throughput"]) / SHOWN[A]["throughput"] * 100
    assert got["throughput"]["delta"] == f"{change:+.1f}%", "the change is that of the two figures printed"


def test_recommend_pools_every_run_of_a_configuration(runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = perf(capsys, runs, "recommend", "--ram", "64GiB")
    assert code == 0
    (row,) = by_heading(out.split("\n", 1)[1])
    # The three runs of batch1-j1, both builds: the median throughput, the highest RSS peak.
    per_hour, peak = METRICS["throughput"].fmt(1863.1), METRICS["rss_peak"].fmt(12 * GIB)
    assert (row["proofs/h"], row["RSS peak"]) == (per_hour, peak)
    assert f"({per_hour} proofs/hour, RSS peak {peak})" in out


def test_the_database_page_prints_what_the_views_print(runs: str, tmp_path: Path) -> None:
    page = tmp_path / "db.html"
    assert main(["report", "--db", runs, "--html", str(page)]) == 0
    html = page.read_text()
    (host,) = tables(html, "hosts")
    assert (host["best /h"], host["spread /h"], host["runs"]) == (shown(A, "throughput"), SPREAD[A], "2")
    bar = METRICS["throughput"].show(SHOWN[A]["throughput"])
    assert f">{bar}<" in html, "the ranking chart's bar says it too"
    history = {row["build"]: row for row in tables(html, "builds")}
    for build in (A, B):
        assert history[build]["spread /h"] == SPREAD[build]
        for name in SHOWN[build]:
            assert history[build][METRICS[name].label] == shown(build, name), (build, name)
    (case,) = tables(html, "compare")
    for name in SHOWN[A]:
        m = METRICS[name]
        assert case[name].startswith(f"{m.show(SHOWN[A][name])} → {m.show(SHOWN[B][name])} "), name
