"""Failures name their real cause, and the run goes on: hangs, failed proofs, a daemon taken out."""

from __future__ import annotations

import pytest
from helpers.support import PROVE_SOURCE

from pytest_cuzk.backends.fake import FakeBehaviour


@pytest.mark.parametrize(
    ("when", "outcome"), [("warm-up", {"errors": 1}), ("case", {"failed": 1})], ids=["in-warm-up", "in-case"]
)
def test_a_frozen_daemon_fails_as_hung_and_the_next_test_gets_a_new_one(fake_run, when, outcome):
    args = ("-k", "winning or wpost", "--cuzk-batch-sizes=1", "--cuzk-proof-timeout=30")
    args += ("--cuzk-skip-warmup",) if when == "case" else ()
    behaviour = {"wpost": FakeBehaviour(freeze=True)}
    result, (daemon,) = fake_run({"test_prove": PROVE_SOURCE}, *args, behaviour=behaviour)
    result.assert_outcomes(passed=1, **outcome)
    during = "the wpost warm-up proof" if when == "warm-up" else "wpost proof job"
    result.stdout.fnmatch_lines([f"daemon hung: the fake is frozen during {during} *"])
    assert "During handling" not in result.stdout.str(), "the message once, not chained"
    assert daemon.starts == [1, 1], "the frozen daemon was replaced before the next test"
    result.stdout.fnmatch_lines(["*restarted: daemon hung: the fake is frozen*"])


def test_a_case_whose_every_proof_fails_says_why(fake_run):
    fail = FakeBehaviour(fail="C1 parse failed: failed to parse C1 output wrapper JSON")
    args = ("-k", "porep and batch1", "--cuzk-skip-warmup")  # else the warm-up proof fails first
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args, behaviour={"porep": fail})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*1 of 1 porep proof failed: 1x FAILED: C1 parse failed: failed to parse C1 output wrapper JSON*"]
    )


OWN_TESTS = """
import pytest

@pytest.mark.cuzk_kinds("winning")
def test_1_a_proof_that_never_comes(cuzk_ready, cuzk_client, cuzk_data):
    cuzk_client.prove(cuzk_data.request("winning"), timeout_s=0.5)

@pytest.mark.cuzk_kinds("wpost")
def test_2_next(cuzk_ready, cuzk_client, cuzk_data):
    assert cuzk_client.prove(cuzk_data.request("wpost"), timeout_s=5).completed
"""


@pytest.mark.parametrize(
    ("behaviour", "said"), [("hang", "a call timed out during test_1"), ("freeze", "daemon hung")]
)
def test_a_users_own_call_that_times_out_takes_the_daemon_out_before_the_next_test(fake_run, behaviour, said):
    rule = FakeBehaviour(**{behaviour: True})
    result, (daemon,) = fake_run({"test_own": OWN_TESTS}, "--cuzk-skip-warmup", behaviour={"winning": rule})
    result.assert_outcomes(failed=1, passed=1)
    assert daemon.starts == [1, 1], "the next test got a fresh daemon"
    assert any(said in r for r in daemon.state.restarts), daemon.state.restarts


NEXT_TEST = """
import pytest

@pytest.mark.cuzk_kinds("wpost")
def test_next(cuzk_ready, cuzk_client, cuzk_data):
    assert cuzk_client.prove(cuzk_data.request("wpost"), timeout_s=5).completed
"""


def test_a_pytest_timeout_takes_the_daemon_out_before_the_next_test(fake_run):
    files = {"test_prove": PROVE_SOURCE, "test_zz_next": NEXT_TEST}
    args = ("-k", "winning or next", "--cuzk-batch-sizes=1", "--cuzk-skip-warmup", "--timeout=2")
    result, (daemon,) = fake_run(files, *args, behaviour={"winning": FakeBehaviour(hang=True)})
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*Timeout (>2.0s) from pytest-timeout*"])
    assert daemon.starts == [1, 1], "the next test got a fresh daemon"
    said = "timed out during test_prove[winning-batch1-j1]"
    assert any(said in r for r in daemon.state.restarts), daemon.state.restarts


def test_a_case_that_failed_part_way_is_in_the_summary_table_marked_failed_with_what_it_measured(fake_run):
    # The warm-up is proof 1, the case's first proof 2; the daemon dies as its second (proof 3) ends.
    args = ("-k", "winning", "--cuzk-proofs=4", "--cuzk-max-proofs=4")
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args, die_after=3)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cuzk proving summary*",
            "test * kind *ok*failed*",
            "test_prove[[]winning-batch1-j1[]] FAILED  winning  *1  *1  *1  *0  *",
            "test_prove[[]winning-batch1-j1[]]: 1 proof in 1 wave, * (failed part-way, after 1 proof: "
            "daemon died during winning proof job *: fake daemon stopped after 3 proofs (die_after=3)); *",
        ]
    )
    assert "no suite case ran" not in result.stdout.str()


RAISES_IN_SETUP = """
import pytest
from filelock import FileLock

@pytest.fixture
def locked(cuzk_daemon, tmp_path):
    with FileLock(str(tmp_path / "x.lock"), timeout=0):  # held: a second holder times out at once
        FileLock(str(tmp_path / "x.lock"), timeout=0).acquire()

def test_uses_a_lock(locked):
    pass
"""


def test_a_raw_error_in_setup_is_listed_by_its_own_first_line_not_a_traceback_line(fake_run):
    """The traceback's last line is filelock's source line; the reason is the exception's own message."""
    result, _ = fake_run({"test_lock": RAISES_IN_SETUP})
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "DID NOT RUN: 1 cuzk test",
            "  test_uses_a_lock: filelock._error.Timeout: The file lock '*x.lock' could not be acquired.",
        ]
    )
