"""Under pytest-xdist every worker's figures and counters reach the one summary on the controller."""

from __future__ import annotations

import re

import pytest
from helpers.support import PROVE_SOURCE, QUICK_PLAN, SCENARIOS_SOURCE

FAKE_PER_WORKER = """
import os
from pytest_cuzk.backends.choice import DaemonChoice
from pytest_cuzk.backends.fake import FakeDaemon

def pytest_cuzk_make_backends(config, settings, workspace):
    daemon = FakeDaemon("local", workspace.subdir(os.environ.get("PYTEST_XDIST_WORKER", "master")))
    return DaemonChoice("fake", "one fake daemon per worker", (daemon,))
"""


@pytest.mark.e2e  # a subprocess pytest run on real daemons: the end-to-end tier
def test_workers_figures_and_counters_reach_one_summary(pytester, monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(FAKE_PER_WORKER)
    pytester.makepyfile(test_a=PROVE_SOURCE, test_b=PROVE_SOURCE)
    args = ("-n", "2", "--dist", "loadfile", "-k", "winning or wpost", "--cuzk-batch-sizes=1")
    result = pytester.runpytest_subprocess(*args, *QUICK_PLAN, "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    summary = out[out.index("cuzk proving summary") :]
    assert len(re.findall(r"^test_prove\[(winning|wpost)-batch1-j1\] ", summary, re.M)) == 4
    # 2 workers x (2 kinds x (1 warm-up + 2 proofs per case) x 2 files / 2 workers)
    assert re.search(r"^  cuzk_proofs_completed_total: \+12$", summary, re.M), summary
    assert summary.count("cold start [local batch 1]") == 2, "one cold start per worker's daemon"


@pytest.mark.e2e  # a subprocess pytest run on real daemons: the end-to-end tier
def test_each_worker_runs_its_scenarios_on_its_own_daemon_and_one_summary_says_them(pytester, monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(FAKE_PER_WORKER)
    pytester.makepyfile(test_load=SCENARIOS_SOURCE)
    bounds = ("--cuzk-proofs=3", "--cuzk-max-proofs=60", "--cuzk-scenario-budget=1")
    args = ("-n", "2", "-k", "test_server and (winning or wpost)", "--cuzk-batch-sizes=1", *bounds)
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    summary = out[out.index("cuzk proving summary") :]
    assert len(re.findall(r"^  test_server\[(winning|wpost)-batch1\]: max sustainable ", summary, re.M)) == 2
    assert summary.count("cold start [local batch 1]") == 2, "one daemon per worker"


@pytest.mark.e2e  # a subprocess pytest run with xdist workers: the end-to-end tier
def test_a_daemon_run_that_collects_no_cuzk_test_is_a_usage_error_under_xdist_too(pytester, monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    pytester.mkdir("tests").joinpath("test_other.py").write_text("def test_porep_named():\n    pass\n")
    args = ("-n", "2", "--cuzk-daemon=ref", "-k", "porep", "-p", "no:cacheprovider")
    result = pytester.runpytest_subprocess(*args, timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        ["ERROR: --cuzk-daemon=ref: none of the 1 test collected from the ini's testpaths (tests) uses cuzk*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), "no worker crashed"


@pytest.mark.e2e  # a subprocess pytest run with xdist workers: the end-to-end tier
def test_a_marker_naming_no_kind_is_a_usage_error_under_xdist_too(pytester, monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(
        test_marked="""
        import pytest

        @pytest.mark.cuzk_kinds("windowpost2")
        def test_typo():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        ["ERROR: test_marked.py::test_typo: @pytest.mark.cuzk_kinds: unknown proof kind 'windowpost2'*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), "no worker crashed"
