"""A baseline build recorded in the results database more often than it was saved: the gate counts every run.

Four fresh pytest runs of one case on the reference engine, one build: the first saved and
recorded, two recorded only, the fourth compared with the saved one. The fourth judges against
three runs of the build (the saved one counted once, its own row left out) and says where they
were found.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from helpers.support import run_ref_case

from pytest_cuzk.results.database import ResultsDB

CASE = ("-k", "test_prove and winning and batch1")
QUICK = ("--cuzk-proofs=2", "--cuzk-max-proofs=2", "--cuzk-concurrency=1")


def test_the_gate_counts_the_baseline_builds_recorded_runs_and_says_so(
    tmp_path: Path, shared_cache: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    common = (f"--cuzk-data-dir={shared_cache}", *QUICK, f"--cuzk-results-db={url}")
    for extra in (("--benchmark-save=base",), (), ()):
        code, out, _ = run_ref_case(CASE, tmp_path, *common, *extra)
        assert code == 0, out[-3000:]
    gate = ("--benchmark-compare=0001", "--cuzk-compare-fail=throughput:5%")
    code, out, _ = run_ref_case(CASE, tmp_path, *common, *gate)
    assert code == 0 or (code == 1 and "regressed" in out), out[-3000:]
    said = re.search(r"throughput .*\(mean of (\d+) runs\).*", out)
    assert said, out[-3000:]
    assert said[1] == "3", said[0]
    assert re.search(
        r"run-to-run spread CV \d+\.\d% over 3 runs of this build on this host "
        r"\(1 saved, 2 in the results database\)",
        said[0],
    ), said[0]
    (saved,) = (tmp_path / "benchmarks").glob("*/0001_base.json")
    machine = json.loads(saved.read_text())["machine_info"]["cuzk"]
    with ResultsDB(url) as db:
        rows = db.rows()
    assert len({row.run.run_id for row in rows}) == 4, "the comparing run was recorded too"
    assert {(row.run.machine_build, row.run.host.fingerprint) for row in rows} == {
        (machine["daemon"], machine["host"]["fingerprint"])
    }, "the build and host a saved run names, as the database names them"
    assert all(row.run.daemon_build.startswith(f"{machine['daemon']} prover=") for row in rows), (
        "the build as the running engine named it adds its prover"
    )
