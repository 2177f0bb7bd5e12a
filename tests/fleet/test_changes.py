"""``cuzk-perf changes`` over a results database written as pytest writes it, SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import datetime as dt
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import pg

from pytest_cuzk.fleet.cli import main
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import HostRecord, RunRecord, TestRecord

db_url, pg_server = pg.db_url, pg.pg_server
T0 = dt.datetime(2025, 3, 1, tzinfo=dt.timezone.utc)
GIB = 2**30
RUNS = 30
RTX = HostRecord.of(
    gpu_models=["NVIDIA GeForce RTX 4090"], gpu_count=1, vram_total_bytes=24 * GIB, cpu_model="Ryzen 9 7950X",
    cpu_cores=16, ram_bytes=256 * GIB, driver="550.54", cuda="12.4", hostname="rig-4090",
)  # fmt: skip
A40 = HostRecord.of(
    gpu_models=["NVIDIA A40"] * 2, gpu_count=2, vram_total_bytes=96 * GIB, cpu_model="EPYC 7543",
    cpu_cores=64, ram_bytes=2048 * GIB, driver="550.54", cuda="12.4", hostname="c.8123",
)  # fmt: skip


def build(i: int) -> str:
    """Six builds of five runs each on the stepped host: the slow one is the fourth, from run 15 on."""
    return f"sha256:{i // 5:04d}" if i < 15 else f"sha256:slow{i // 5:04d}"


def record(db: ResultsDB, host: HostRecord, label: str, i: int, per_hour: float, build_name: str) -> None:
    run = RunRecord(host=host, daemon_build=build_name, label=label, started_at=T0 + dt.timedelta(hours=i))
    db.start_run(run)
    db.record_test(TestRecord(
        run_id=run.run_id, nodeid="test_prove[porep-batch1-j1]", kind="porep", batch_size=1, concurrency=1,
        proofs_ok=8, proofs_failed=0, p50_s=3600 / per_hour, p90_s=3600 / per_hour * 1.1,
        max_s=3600 / per_hour * 1.3, proofs_per_hour=per_hour, rss_peak_bytes=100 * GIB, vram_peak_bytes=None,
        label=label,
    ))  # fmt: skip
    db.finish_run(run.run_id)


def write_history(url: str) -> str:
    """30 runs on the 4090 (2% spread) with a 10% drop at run 15; 30 on an A40 (1%) with none."""
    rng = np.random.default_rng(46)
    with ResultsDB(url) as db:
        for i in range(RUNS):
            slow = 0.9 if i >= 15 else 1.0
            record(db, RTX, "4090", i, 40.0 * slow * (1 + 0.02 * rng.standard_normal()), build(i))
            record(db, A40, "a40", i, 35.0 * (1 + 0.01 * rng.standard_normal()), f"sha256:{i // 5:04d}")
    return url


@pytest.fixture
def history(db_url: str) -> str:
    return write_history(db_url)


@pytest.fixture
def sqlite_history(tmp_path: Path) -> str:
    return write_history(f"sqlite:///{tmp_path / 'results.db'}")


def perf(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--db", url])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_step_is_named_at_its_build_with_size_interval_and_p(
    history: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = perf(capsys, history, "changes", "--figures", "throughput,p50,rss_peak")
    assert (code, err) == (0, "")
    blocks = re.split(r"^(?=porep)", out, flags=re.M)
    rtx = next(b for b in blocks if b.startswith("porep batch1-j1 on 4090 "))
    a40 = next(b for b in blocks if b.startswith("porep batch1-j1 on a40 "))
    assert f"porep batch1-j1 on 4090 (fingerprint {RTX.fingerprint[:12]}), 30 runs" in out
    change = re.search(
        r"^  throughput (\d+\.\d)% worse \(95% CI (\d+\.\d)% worse to (\d+\.\d)% worse, p=(\S+)\): "
        r"(\S+)/h over 15 runs -> (\S+)/h over 15 runs\n"
        r"    before sha256:0002 \(run of 2025-03-01 14:00 UTC\)\n"
        r"    after  sha256:slow0003 \(run of 2025-03-01 15:00 UTC\)$",
        rtx,
        re.M,
    )
    assert change, out
    worse, low, high, p = (float(change[i]) for i in range(1, 5))
    assert low < 10 < high and low < worse < high and p < 0.001
    assert float(change[6]) < float(change[5])
    # p50 is the same runs' seconds per proof: it moves with throughput, the other way round
    assert re.search(r"^  p50 \d+\.\d% worse .* over 15 runs -> .* over 15 runs$", rtx, re.M), out
    assert "  no change found in 30 runs: rss_peak" in rtx
    assert "  no change found in 30 runs: throughput, p50, rss_peak" in a40
    assert "not recorded" not in out


def test_one_host_one_figure(history: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = perf(capsys, history, "changes", "--host", "a40", "--figures", "vram_peak,throughput")
    assert code == 0
    assert out.startswith("porep batch1-j1 on a40 (fingerprint ")
    assert out.splitlines()[1:] == ["  no change found in 30 runs: throughput", "  not recorded: vram_peak"]


def test_csv_otava_reads(history: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    one = tmp_path / "cuzk.csv"
    code, out, err = perf(capsys, history, "changes", "--host", "4090", "--csv", str(one))
    assert code == 0
    where = f"porep batch1-j1 on 4090 (fingerprint {RTX.fingerprint[:12]})"
    assert out.startswith(f"wrote 30 runs of {where} to {one}\n")
    assert err.endswith(
        "): left out of the CSV, not in every run: p99, gpu, synthesis, queue_wait, vram_peak\n"
    )
    with one.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["time", "throughput", "p50", "p90", "max", "rss_peak", "build", "run_id",
                             "host", "fingerprint"]  # fmt: skip
    assert [r["build"] for r in rows] == [build(i) for i in range(RUNS)]
    times = [dt.datetime.fromisoformat(r["time"]) for r in rows]
    assert times == [T0 + dt.timedelta(hours=i) for i in range(RUNS)]
    assert all(float(r["throughput"]) > 0 and r["host"] == "4090" for r in rows)
    assert all(float(r["p50"]) == pytest.approx(3600 / float(r["throughput"])) for r in rows)

    code, out, _ = perf(capsys, history, "changes", "--csv", str(one), "--figures", "throughput")
    assert code == 0
    both = sorted(p.name for p in tmp_path.glob("cuzk-*.csv"))
    assert both == ["cuzk-porep-batch1-j1-4090.csv", "cuzk-porep-batch1-j1-a40.csv"]


def test_bad_input(history: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = perf(capsys, history, "changes", "--figures", "throughput,speed")
    assert code == 2
    assert "unknown figure 'speed': use throughput, p50" in err
    code, _, err = perf(capsys, history, "changes", "--max-p", "5%")
    assert code == 2 and "invalid p-value '5%'" in err
    code, _, err = perf(capsys, history, "changes", "--min-runs", "0")
    assert code == 2 and "invalid run count '0'" in err
    code, out, _ = perf(capsys, history, "changes", "--host", "no-such-host")
    assert (code, out) == (0, "no data\n")


def test_an_empty_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    ResultsDB(url).close()
    assert perf(capsys, url, "changes") == (0, "no data\n", "")
    code, out, err = perf(capsys, url, "changes", "--csv", str(tmp_path / "x.csv"))
    assert (code, out) == (1, "")
    assert err == f"cuzk-perf changes: --csv {tmp_path / 'x.csv'}: no runs selected, nothing to write\n"
    assert not (tmp_path / "x.csv").exists()
    code, _, err = perf(capsys, f"sqlite:///{tmp_path / 'missing.db'}", "changes")
    assert code == 2 and "does not exist" in err


CHANGE = re.compile(r"throughput (\d+\.\d)% worse \(95% CI (\d+\.\d)% worse to (\d+\.\d)% worse")


def test_fail_worse_names_the_build_whose_newest_change_is_beyond_the_limit(
    sqlite_history: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = perf(capsys, sqlite_history, "changes", "--fail-worse", "throughput:5%,p50:5%")
    assert (code, err) == (1, "")
    where = f"porep batch1-j1 on 4090 (fingerprint {RTX.fingerprint[:12]})"
    since = "since sha256:slow0003 (its first run 2025-03-01 15:00 UTC; before it sha256:0002), limit 5%"
    regressions = [line for line in out.splitlines() if line.startswith("REGRESSION")]
    assert len(regressions) == 2, out  # throughput and p50, the same runs' two figures
    assert regressions[0].startswith(f"REGRESSION {where}: throughput ")
    assert regressions[1].startswith(f"REGRESSION {where}: p50 ")
    assert all(line.endswith(since) for line in regressions)
    assert "on a40" not in "".join(regressions)
    assert "no newest change worse" not in out

    change = CHANGE.search(regressions[0])
    assert change, out
    worse, low = float(change[1]), float(change[2])
    # beyond the limit, but its interval reaches within it: reported, not failed
    code, out, _ = perf(
        capsys, sqlite_history, "changes", "--fail-worse", f"throughput:{(low + worse) / 2:.2f}%"
    )
    assert code == 0
    assert f"beyond the limit, its interval reaching within it: not failed: {where}: throughput" in out
    assert out.endswith("no newest change worse than its limit (--fail-worse)\n")
    code, out, _ = perf(capsys, sqlite_history, "changes", "--fail-worse", f"throughput:{worse + 1:.0f}%")
    assert code == 0
    assert "REGRESSION" not in out and "not failed" not in out
    code, out, _ = perf(capsys, sqlite_history, "changes", "--fail-worse", "rss_peak:1%")
    assert code == 0, out  # a figure without a change


def test_fail_worse_passes_once_a_slowdown_is_recovered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    rng = np.random.default_rng(7)
    with ResultsDB(url) as db:
        for i in range(RUNS):
            slow = 0.85 if 10 <= i < 20 else 1.0
            record(db, RTX, "4090", i, 40.0 * slow * (1 + 0.01 * rng.standard_normal()), f"sha256:{i:04d}")
    code, out, _ = perf(capsys, url, "changes", "--figures", "throughput", "--fail-worse", "throughput:5%")
    assert code == 0
    changes = re.findall(r"^  throughput \d+\.\d% (\w+) .*\n.*\n    after  (\S+) ", out, re.M)
    assert changes == [("worse", "sha256:0010"), ("better", "sha256:0020")], out
    assert out.endswith("no newest change worse than its limit (--fail-worse)\n")


def test_fail_worse_bad_input(sqlite_history: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = perf(capsys, sqlite_history, "changes", "--fail-worse", "speed:5%")
    assert code == 2 and "Invalid threshold 'speed:5%' from --fail-worse" in err
    code, _, err = perf(capsys, sqlite_history, "changes", "--fail-worse", "throughput:5")
    assert code == 2 and "give the limit in percent (throughput:5%)" in err
    code, out, err = perf(
        capsys, sqlite_history, "changes", "--figures", "throughput", "--fail-worse", "p50:5%"
    )
    assert (code, out) == (2, "")
    assert err == "cuzk-perf changes: --fail-worse p50: a figure --figures leaves out; add it to --figures\n"
