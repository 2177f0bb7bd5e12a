"""Fleet runs: one pytest session against several daemons, in parallel under xdist, into one database."""

from __future__ import annotations

import re

from helpers.support import PROVE_SOURCE, QUICK_PLAN, ref_daemons

from pytest_cuzk.results.database import ResultsDB


def test_two_daemons_prove_in_parallel_and_land_in_one_database(pytester, tmp_path, ref_params):
    db = f"sqlite:///{tmp_path / 'fleet.db'}"
    pytester.makepyfile(test_prove=PROVE_SOURCE)
    with ref_daemons(tmp_path, ref_params, count=2) as refs:
        addr_a, addr_b = refs.addresses
        result = pytester.runpytest_subprocess(
            "-n",
            "2",
            ".",
            f"--cuzk-daemon={addr_a},{addr_b}",
            f"--cuzk-label={addr_a}=rtx4090",
            f"--cuzk-label={addr_b}=a40",
            f"--cuzk-manifest={refs.manifest}",
            f"--cuzk-param-cache={refs.params}",
            f"--cuzk-results-db={db}",
            "-k",
            "winning or wpost",
            "-p",
            "no:cacheprovider",
            "-v",
            *QUICK_PLAN,
            timeout=300,
        )
        assert refs.all_running(), "attached daemons are left running"
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    for host in ("rtx4090", "a40"):
        for kind in ("winning", "wpost"):
            assert f"test_prove[{host}-{kind}-batch1-j1]" in out
    # Each worker took one daemon's tests: per host, one worker, and not the same one.
    workers: dict[str, set[str]] = {}
    for worker, host in re.findall(r"\[(gw\d)\].* PASSED test_prove\.py::test_prove\[(\w+)-", out):
        workers.setdefault(host, set()).add(worker)
    assert all(len(w) == 1 for w in workers.values()), workers
    assert workers["rtx4090"] != workers["a40"], "hosts prove in parallel on different workers"
    # One summary on the controller, with the rows of both workers.
    assert out.count("test_prove[rtx4090-") >= 4 and out.count("test_prove[a40-") >= 4
    with ResultsDB(db) as results:
        rows = results.rows()
    assert sorted((r.run.label, r.test.kind) for r in rows) == [
        ("a40", "winning"),
        ("a40", "wpost"),
        ("rtx4090", "winning"),
        ("rtx4090", "wpost"),
    ]
    assert len({r.run.run_id for r in rows}) == 2, "one run per daemon"
    assert all(r.test.proofs_ok == 2 for r in rows)
