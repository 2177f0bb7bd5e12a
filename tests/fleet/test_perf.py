"""cuzk-perf against a small fleet stored on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import json
import re
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import pg

from pytest_cuzk.fleet.cli import main, parse_fail, parse_percent
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import HostRecord, RunRecord, TestRecord

db_url, pg_server = pg.db_url, pg.pg_server  # each test runs on SQLite and on PostgreSQL
GIB = 2**30
T0 = dt.datetime(2025, 3, 1, tzinfo=dt.timezone.utc)
A40 = HostRecord.of(
    gpu_models=["NVIDIA A40"] * 2, gpu_count=2, vram_total_bytes=96 * GIB, cpu_model="EPYC 7543",
    cpu_cores=64, ram_bytes=2048 * GIB, driver="550.54", cuda="12.4", hostname="c.8123",
)  # fmt: skip
A40_TWIN = dataclasses.replace(A40, hostname="c.9001")
RTX = HostRecord.of(
    gpu_models=["NVIDIA GeForce RTX 4090"], gpu_count=1, vram_total_bytes=24 * GIB, cpu_model="Ryzen 9 7950X",
    cpu_cores=16, ram_bytes=256 * GIB, driver="550.54", cuda="12.4", hostname="rig-4090",
)  # fmt: skip

# (host, label, machine id, build, day, [(kind, batch, j, proofs/hour, p50 s, RSS peak GiB)])
# "bad" regresses PoRep batch 1 on the 4090 (throughput -8%, RSS +11%); "good" stays within 5%/10%.
# The two A40 machines are built alike (one fingerprint) and rented apart (label, hostname, machine id).
FLEET = [
    (A40, "a40", "20481", "sha256:base0001", 0,
     [("porep", 1, 1, 35.9, 90.0, 180), ("porep", 2, 1, 30.0, 100.0, 300),
      ("winning", 1, 1, 900.0, 2.0, 10)]),
    (A40_TWIN, "a40-2", "20482", "sha256:base0001", 0, [("porep", 1, 1, 34.0, 92.0, 182)]),
    (RTX, "4090", "31337", "sha256:base0001", 1,
     [("porep", 1, 1, 41.3, 80.0, 180), ("porep", 2, 1, 50.0, 70.0, 230)]),
    (RTX, "4090", "31337", "sha256:bad00002", 2,
     [("porep", 1, 1, 38.0, 85.0, 200), ("porep", 2, 1, 51.0, 70.0, 231)]),
    (RTX, "4090", "31337", "sha256:good0003", 3,
     [("porep", 1, 1, 40.5, 81.0, 185), ("porep", 2, 1, 52.0, 69.0, 229)]),
]  # fmt: skip


def samples(per_hour: float, p50: float, seed: int) -> dict[str, list[float]]:
    """20 waves of one proof around the row's figures, 2% apart, in 10 windows: what a stored run holds."""
    jitter = 1 + 0.02 * np.random.default_rng(seed).standard_normal((2, 20))
    waves = (3600 / per_hour * jitter[0]).round(3).tolist()
    windows = [i // 2 for i in range(20)]
    return {"latency_s": (p50 * jitter[1]).round(3).tolist(), "wave_s": waves, "wave_size": [1] * 20,
            "wave_window": windows}  # fmt: skip


def store(db_url: str, fleet: list[tuple[Any, ...]]) -> str:
    """Write ``fleet`` (FLEET's shape) as finished runs; returns the URL."""
    with ResultsDB(db_url) as db:
        for host, label, machine, build, day, tests in fleet:
            run = RunRecord(
                host=host,
                daemon_build=build,
                label=label,
                host_id=machine,
                started_at=T0 + dt.timedelta(days=day),
            )
            db.start_run(run)
            for kind, b, j, per_hour, p50, rss in tests:
                db.record_test(TestRecord(
                    run_id=run.run_id, nodeid=f"test_prove[{kind}-batch{b}-j{j}]", kind=kind, batch_size=b,
                    concurrency=j, proofs_ok=4, proofs_failed=0, p50_s=p50, p90_s=p50 * 1.1, max_s=p50 * 1.2,
                    proofs_per_hour=per_hour, rss_peak_bytes=rss * GIB, vram_peak_bytes=20 * GIB, label=label,
                    sampler_interval_s=0.1, samples=samples(per_hour, p50, day * 10 + b),
                ))  # fmt: skip
            db.finish_run(run.run_id)
    return db_url


@pytest.fixture
def fleet(db_url: str) -> str:
    return store(db_url, FLEET)


def perf(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--db", url])
    out, err = capsys.readouterr()
    return code, out, err


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("  ") if c.strip()]


def body(out: str) -> list[list[str]]:
    """Rows of the first table in ``out``: the lines after the rule with as many cells as the header."""
    lines = out.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    rows = []
    for line in lines[rule + 1 :]:
        if len(cells(line)) != len(cells(lines[rule - 1])):
            break
        rows.append(cells(line))
    return rows


def test_hosts_ranks_machines_by_measured_throughput(fleet: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = perf(capsys, fleet, "hosts")
    assert code == 0
    rows = body(out)
    # Each machine's best build and configuration: its runs, their pooled figure and their spread.
    assert [(r[0], r[1], r[2], r[3], *r[7:]) for r in rows] == [
        ("porep", "4090", "rig-4090", "31337", "1", "52.0", "52.0..52.0", "sha256:good0003", "batch2-j1"),
        ("porep", "a40", "c.8123", "20481", "1", "35.9", "35.9..35.9", "sha256:base0001", "batch1-j1"),
        ("porep", "a40-2", "c.9001", "20482", "1", "34.0", "34.0..34.0", "sha256:base0001", "batch1-j1"),
        ("winning", "a40", "c.8123", "20481", "1", "900.0", "900.0..900.0", "sha256:base0001", "batch1-j1"),
    ]
    header, rule = out.splitlines()[:2]
    assert len(header) == len(rule)  # the last column's title is as wide as its rule: columns line up
    assert cells(header)[:5] == ["kind", "label", "hostname", "machine id", "fingerprint"]
    assert rows[0][4] == RTX.fingerprint[:12] and rows[1][4] == rows[2][4] == A40.fingerprint[:12]
    assert (rows[0][5], rows[0][6]) == ("1x NVIDIA GeForce RTX 4090", "256.0 GiB")


def test_history_keeps_each_configuration_in_its_own_row(
    fleet: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = perf(capsys, fleet, "history", "--kind", "porep-c2", "--host", "4090")
    assert code == 0
    assert cells(out.splitlines()[0])[1:6] == ["build", "host", "batch", "j", "runs"]
    assert [(r[1], r[2], r[3], r[4], r[7]) for r in body(out)] == [
        ("sha256:base0001", "4090", "1", "1", "41.3"),
        ("sha256:base0001", "4090", "2", "1", "50.0"),
        ("sha256:bad00002", "4090", "1", "1", "38.0"),
        ("sha256:bad00002", "4090", "2", "1", "51.0"),
        ("sha256:good0003", "4090", "1", "1", "40.5"),
        ("sha256:good0003", "4090", "2", "1", "52.0"),
    ]
    code, out, _ = perf(capsys, fleet, "history", "--kind", "porep", "--host", A40.fingerprint[:8])
    assert [(r[2], r[3]) for r in body(out)] == [("a40", "1"), ("a40", "2"), ("a40-2", "1")]


def test_compare_fails_on_a_planted_regression(fleet: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = perf(
        capsys, fleet, "compare", "base0001", "bad00002", "--fail", "throughput:5%,rss_peak:10%"
    )
    assert code == 1
    regressions = [line for line in out.splitlines() if line.startswith("REGRESSION")]
    assert len(regressions) == 2, out
    # The builds' recorded figures, tested on their pooled samples (10 windows a run, 2% apart) for the
    # interval and the p-value.
    assert re.fullmatch(
        r"REGRESSION porep batch1-j1 on 4090 throughput: A 4\d\.\d/h -> B 3\d\.\d/h \(-[789]\.\d%, "
        r"95% CI -\d+\.\d% to -[6-9]\.\d%, p=\S+, limit -5%\)",
        regressions[0],
    ), regressions[0]
    assert regressions[1] == (
        "REGRESSION porep batch1-j1 on 4090 rss_peak: A 180.0 GiB -> B 200.0 GiB "
        "(+11.1%, a peak, compared as measured, limit +10%)"
    )
    # Only the 4090 ran both builds: the A40's figures must not enter the comparison.
    assert {r[3] for r in body(out)} == {"4090"}


def test_compare_passes_within_thresholds(fleet: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = perf(
        capsys, fleet, "compare", "base0001", "good0003", "--fail", "throughput:5%,rss_peak:10%"
    )
    assert code == 0, out
    assert "no regression beyond the thresholds" in out
    assert perf(capsys, fleet, "compare", "base0001", "bad00002")[0] == 0  # no --fail: report only


def test_compare_usage_errors(fleet: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = perf(capsys, fleet, "compare", "nope", "bad00002")
    assert code == 2
    assert "build 'nope' is not in the database; known builds:" in err
    assert "  sha256:good0003" in err
    code, _, err = perf(capsys, fleet, "compare", "sha256", "bad00002")
    assert code == 2
    assert "build 'sha256' is ambiguous" in err
    code, _, err = perf(capsys, fleet, "compare", "base", "bad", "--fail", "speed:5%")
    assert code == 2
    assert "Invalid threshold 'speed:5%' from --fail" in err


def test_export_csv_and_json(fleet: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert perf(capsys, fleet, "export", "--format", "csv", "-o", str(tmp_path / "r.csv"))[0] == 0
    with open(tmp_path / "r.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 10
    assert json.loads(rows[0]["host_gpu_models"]) == ["NVIDIA A40", "NVIDIA A40"]
    code, out, _ = perf(capsys, fleet, "export", "--format", "json", "--build", "sha256:bad00002")
    records = json.loads(out)
    assert code == 0
    assert {(r["kind"], r["batch_size"], r["proofs_per_hour"], r["run_label"]) for r in records} == {
        ("porep", 1, 38.0, "4090"),
        ("porep", 2, 51.0, "4090"),
    }
    assert records[0]["rss_peak_bytes"] == 200 * GIB
    assert dt.datetime.fromisoformat(records[0]["run_started_at"]) == T0 + dt.timedelta(days=2)


def test_plot_writes_pngs(fleet: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = perf(capsys, fleet, "plot", "-o", str(tmp_path / "plots"))
    assert code == 0
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == ["throughput_vs_gpu.png", "throughput_vs_ram.png", "trend.png"]
    for name in names:
        data = (tmp_path / "plots" / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
        assert f"wrote {tmp_path / 'plots' / name}" in out


@pytest.mark.parametrize(
    ("ram", "expected"),
    [("512GiB", "porep: use batch size 2, concurrency 1 (50.5 proofs/hour, RSS peak 300.0 GiB)"),
     ("256GiB", "porep: use batch size 1, concurrency 1 (38.0 proofs/hour, RSS peak 200.0 GiB)"),
     ("274877906944", "porep: use batch size 1, concurrency 1")],
)  # fmt: skip
def test_recommend_picks_the_fastest_config_that_fits(
    fleet: str, capsys: pytest.CaptureFixture[str], ram: str, expected: str
) -> None:
    code, out, _ = perf(capsys, fleet, "recommend", "--ram", ram, "--kind", "porep")
    assert code == 0
    assert expected in out


def test_recommend_names_its_columns_and_prints_small_sizes_in_mib(
    fleet: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = perf(capsys, fleet, "recommend", "--ram", "512MiB", "--kind", "winning")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "RAM 512 MiB less 15%: peaks must stay under 435 MiB"
    assert cells(lines[1]) == ["kind", "batch", "j", "RSS peak", "proofs/h", "hosts", "fits", "pick"]
    assert "winning: nothing measured fits; the smallest peak is 10.0 GiB (batch 1, j 1)" in out


def test_recommend_when_nothing_fits_or_no_data(
    fleet: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = perf(capsys, fleet, "recommend", "--ram", "200GB", "--margin", "10%", "--kind", "porep")
    assert code == 1
    assert "porep: nothing measured fits; the smallest peak is 200.0 GiB (batch 1, j 1)" in out
    assert perf(capsys, fleet, "recommend", "--ram", "16GiB", "--kind", "winning")[0] == 0
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    ResultsDB(empty).close()  # a database with no run yet
    for argv in (["recommend", "--ram", "256GiB"], ["hosts"], ["plot", "-o", str(tmp_path / "p")]):
        assert perf(capsys, empty, *argv)[:2] == (0, "no data\n")
    assert not (tmp_path / "p").exists()


def test_bad_sizes_and_percentages_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    code, _, err = perf(capsys, url, "recommend", "--ram", "lots")
    assert code == 2
    assert "argument --ram: Invalid size 'lots'" in err
    code, _, err = perf(capsys, url, "recommend", "--ram", "1TiB", "--margin", "150%")
    assert code == 2
    assert "percentage '150%' out of range" in err
    assert perf(capsys, url, "recommend", "--ram", "1TiB", "--kind", "bogus")[0] == 2
    assert parse_fail("throughput:5%, rss_peak:10%") == {"throughput": 5.0, "rss_peak": 10.0}
    code, _, err = perf(capsys, url, "compare", "a", "b", "--fail", "rss_peak:10")
    assert code == 2 and "give the limit in percent (rss_peak:10%)" in err
    assert parse_percent("15%") == 0.15


def test_database_from_environment_and_entry_point(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_CUZK_RESULTS_DB", str(tmp_path / "env.db"))
    ResultsDB(str(tmp_path / "env.db")).close()
    assert main(["hosts"]) == 0
    assert capsys.readouterr().out == "no data\n"
    (script,) = entry_points(group="console_scripts", name="cuzk-perf")
    assert script.load() is main
    assert main(["--help"]) == 0
    assert main([]) == 2


@pytest.mark.parametrize(
    "argv",
    [["hosts"], ["history", "--kind", "porep"], ["compare", "a", "b"], ["export"],
     ["recommend", "--ram", "1TiB"], ["report", "--html", "page.html"]],
)  # fmt: skip
def test_a_reading_command_on_a_database_file_that_is_not_there_fails_and_creates_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--db", "typo.db"]) == 2
    err = capsys.readouterr().err
    assert (
        f"cuzk-perf {argv[0]}: the results database {tmp_path / 'typo.db'} does not exist: check the path"
        in err
    )
    assert list(tmp_path.iterdir()) == [], "no database, lock or page made"


NEAR = [
    (RTX, "4090", "31337", "sha256:base0001", 0, [("porep", 1, 1, 40.0, 80.0, 180)]),
    (RTX, "4090", "31337", "sha256:near0002", 1, [("porep", 1, 1, 38.2, 80.0, 180)]),  # 4.5% slower
    (RTX, "4090", "31337", "sha256:fast0003", 2, [("porep", 1, 1, 40.1, 80.0, 180)]),  # 0.25% faster
]


def test_compare_names_a_change_it_cannot_decide_and_lists_it_only_when_worse(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = store(db_url, NEAR)
    code, out, _ = perf(capsys, url, "compare", "base0001", "near0002", "--fail", "throughput:5%")
    assert code == 0, out
    (row,) = [r for r in body(out) if r[4] == "throughput"]
    assert row[-1] == "undecided", out
    assert "undecided, not failed: porep batch1-j1 on 4090 throughput: A 40.0/h -> B 38.2/h (-4.5%" in out
    code, out, _ = perf(capsys, url, "compare", "base0001", "fast0003", "--fail", "throughput:0.5%")
    (row,) = [r for r in body(out) if r[4] == "throughput"]
    assert code == 0 and row[-1] == "undecided", out
    assert "not failed:" not in out, "a faster build is not listed among the worse"
