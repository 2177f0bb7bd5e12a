"""fate: the one place that decides whether a failed call's daemon is hung, dead, busy or fine."""

from __future__ import annotations

import grpc
import pytest

from pytest_cuzk.backends import fate
from pytest_cuzk.backends.fake import FakeDaemon
from pytest_cuzk.core.errors import (
    Cancelled,
    DaemonExited,
    DaemonHung,
    DaemonUnavailable,
    DeadlineExceeded,
    ProofTimeout,
)

ADDRESS = "unix:///run/cuzk.sock"


@pytest.fixture
def daemon(tmp_path):
    fake = FakeDaemon("local", tmp_path / "fake")
    fake.bring_up(1, [], lambda: None)
    yield fake
    fake.stop()


def _deadline() -> DeadlineExceeded:
    return DeadlineExceeded(ADDRESS, "AwaitProof", grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")


def _unavailable() -> DaemonUnavailable:
    return DaemonUnavailable(ADDRESS, "SubmitProof", grpc.StatusCode.UNAVAILABLE, "failed to connect")


@pytest.mark.parametrize("error", [_deadline(), _unavailable(), ProofTimeout("job-1", 61.0, 60.0)])
def test_a_stopped_daemon_is_hung_whatever_its_call_said_and_is_replaced(daemon, error):
    daemon.frozen = True
    named = fate.settle(daemon, error, "test_x", probe_timeout_s=0.1)
    assert isinstance(named, DaemonHung)
    assert str(named) == "daemon hung: the fake is frozen during test_x"
    assert named.__cause__ is error
    assert not daemon.alive(), "killed, so the next test gets a fresh one"
    assert daemon.state.restarts == [f"restarted: {named}"]


@pytest.mark.parametrize(
    "error", [_unavailable(), Cancelled(ADDRESS, "AwaitProof", grpc.StatusCode.CANCELLED, "")]
)
def test_a_refused_call_of_a_dead_daemon_is_named_a_death(daemon, error):
    daemon.stop()
    named = fate.settle(daemon, error, "test_x", probe_timeout_s=0.1)
    assert isinstance(named, DaemonExited)
    assert str(named).startswith("daemon died during test_x: fake daemon stopped after 0 proofs")
    assert named.__cause__ is error


def test_a_call_that_timed_out_on_a_daemon_that_still_answers_takes_it_out(daemon):
    error = ProofTimeout("job-1", 61.0, 60.0)
    assert fate.settle(daemon, error, "test_x", probe_timeout_s=1.0) is error, (
        "the timeout is the test's failure"
    )
    (reason,) = daemon.state.restarts
    assert reason.startswith("restarted: a call timed out during test_x (")
    assert reason.endswith("cuzk cannot cancel it")
    assert not daemon.alive(), "it keeps proving what it cannot cancel: not shared with the next test"


def test_a_failure_that_is_not_the_daemons_leaves_it_serving(daemon):
    error = AssertionError("the proof's size")
    assert fate.settle(daemon, error, "test_x", probe_timeout_s=0.1) is error
    assert daemon.alive()
    assert daemon.state.restarts == []


def test_a_hang_or_death_found_earlier_is_dealt_with_as_named(daemon):
    hung = DaemonHung("daemon hung: stopped during Prove")
    assert fate.settle(daemon, hung, "test_x", probe_timeout_s=0.1) is hung
    assert daemon.state.restarts == [f"restarted: {hung}"]


def test_check_between_polls_names_a_death_a_hang_or_nothing(daemon):
    assert fate.check(daemon, "Prove of job 1") is None
    daemon.frozen = True
    with pytest.raises(DaemonHung, match=r"^daemon hung: the fake is frozen during Prove of job 1$"):
        fate.check(daemon, "Prove of job 1")
    daemon.frozen = False
    daemon.stop()
    with pytest.raises(DaemonExited, match=r"^daemon died during Prove of job 1: fake daemon stopped"):
        fate.check(daemon, "Prove of job 1")
