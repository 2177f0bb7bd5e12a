"""Running a case against a fake daemon: every proof checked, and each way it can go wrong named."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_cuzk.backends.fake import FakeBehaviour, FakeDaemon
from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.core.errors import DaemonExited, DaemonHung
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.data.testdata import TestData
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.plan import Plan, run_case
from pytest_cuzk.run.tally import case_figures
from pytest_cuzk.run.waves import CaseResult, Runner
from pytest_cuzk.vocab.kinds import KINDS

WINNING = KINDS["winning"]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[FakeDaemon]:
    fake = FakeDaemon("local", tmp_path / "fake")
    yield fake
    fake.stop()


def _run(
    daemon: FakeDaemon, pytester: pytest.Pytester, case: Case, proofs: int = 2, timeout_s: float = 5.0
) -> CaseResult:
    daemon.bring_up(case.batch_size, [case.kind], lambda *_: None)
    data = TestData(resolve_settings(pytester.parseconfig()), daemon.profile().manifest(), None)
    with ProvingClient(daemon.address) as client:
        runner = Runner(
            client=client,
            backend=daemon,
            make_request=lambda: data.request(case.kind),
            proof_timeout_s=timeout_s,
            probe_timeout_s=min(timeout_s, 1.0),
            verify=daemon.profile().verifier(case.kind),
        )
        exactly = Plan(min_proofs=proofs, max_proofs=proofs, budget_s=60.0, window_s=1.0, stability_pct=10.0)
        return run_case(case, runner, exactly, benchmark=None)


def test_every_proof_is_checked_verified_and_timed(daemon, pytester):
    result = _run(daemon, pytester, Case("local", KINDS["porep"], 2, 2), proofs=8)
    assert len(result.ok) == 8 and not result.failed, "two waves of batch 2 x concurrency 2"
    assert all(p.proof_len == KINDS["porep"].proof_len for p in result.ok)
    assert len({p.job_id for p in result.proofs}) == 8, "every request has its own id (cuzk caches by id)"
    figures = case_figures(result, "test_x")
    assert (figures.proofs_ok, figures.proofs_failed, figures.batch_size) == (8, 0, 2)
    assert figures.throughput_proofs_per_hour > 0 and figures.latency_p50_s is not None


def test_a_proof_that_does_not_verify_fails_with_the_reason(daemon, pytester):
    daemon.behaviour["winning"] = FakeBehaviour(wrong_proof=True)
    result = _run(daemon, pytester, Case("local", WINNING, 1, 1))
    assert not result.ok
    assert all(p.error == "proof does not verify against the reference verifying key" for p in result.failed)


def test_a_malformed_proof_names_its_length(daemon, pytester):
    daemon.behaviour["winning"] = FakeBehaviour(malformed=True)
    result = _run(daemon, pytester, Case("local", WINNING, 1, 1), proofs=1)
    (failed,) = result.failed
    assert failed.error == (
        "invalid proof structure: malformed proof: winning proof is 191 bytes, expected 192 "
        "(1 partitions x 192 bytes)"
    )


def test_a_failed_job_carries_the_daemons_message(daemon, pytester):
    daemon.behaviour["winning"] = FakeBehaviour(fail="synthesis failed: randomness must be exactly 32 bytes")
    result = _run(daemon, pytester, Case("local", WINNING, 1, 1), proofs=1)
    assert [p.error for p in result.failed] == [
        "FAILED: synthesis failed: randomness must be exactly 32 bytes"
    ]


def test_a_hung_proof_times_out_on_the_client_and_is_named(daemon, pytester):
    daemon.behaviour["winning"] = FakeBehaviour(hang=True)
    result = _run(daemon, pytester, Case("local", WINNING, 1, 1), proofs=1, timeout_s=0.5)
    (record,) = result.proofs
    assert record.timed_out and not record.ok
    assert 0.5 <= record.latency_s < 2.0, "bounded by the client: the proof timeout plus a small margin"
    assert record.error.startswith(f"winning proof {record.job_id} timed out after {record.latency_s:.1f}s")
    assert "the daemon could not cancel it (cuzk cannot)" in record.error


def test_a_daemon_that_dies_mid_wave_is_reported_as_a_death(daemon, pytester):
    daemon.die_after = 1
    daemon.behaviour["winning"] = FakeBehaviour(delay_s=0.05)
    with pytest.raises(
        DaemonExited,
        match=r"daemon died during a wave of 4 winning proofs \(jobs .* to .*\): fake daemon stopped",
    ):
        _run(daemon, pytester, Case("local", WINNING, 1, 4), proofs=8)


def test_a_daemon_that_freezes_mid_proof_is_named_hung_not_slow(daemon, pytester):
    daemon.behaviour["winning"] = FakeBehaviour(freeze=True)
    with pytest.raises(DaemonHung, match=r"daemon hung: the fake is frozen during winning proof job "):
        _run(daemon, pytester, Case("local", WINNING, 1, 1), proofs=1, timeout_s=30)


def test_a_daemon_that_answers_nothing_after_a_timeout_is_hung(daemon, pytester):
    daemon.behaviour["winning"] = FakeBehaviour(hang=True)
    original = daemon.stuck
    daemon.stuck = lambda: None  # an attached daemon: its process cannot be looked at
    daemon.health = lambda timeout_s: f"no answer to GetStatus for {timeout_s:g} s, process not visible"
    try:
        with pytest.raises(
            DaemonHung,
            match=r"daemon hung: no answer to GetStatus for 0.5 s, .* during winning proof job .* timed out",
        ):
            _run(daemon, pytester, Case("local", WINNING, 1, 1), proofs=1, timeout_s=0.5)
    finally:
        daemon.stuck = original


def test_a_proof_repeated_from_an_earlier_job_is_a_replay(daemon, pytester):
    result = _run(daemon, pytester, Case("local", WINNING, 1, 1), proofs=1)
    (first,) = result.ok
    daemon.behaviour["winning"] = FakeBehaviour(replay_of=first.job_id)
    result = _run(daemon, pytester, Case("local", WINNING, 1, 1), proofs=1)
    (record,) = result.failed
    assert record.error == (
        f"the proof is byte-identical to job {first.job_id}'s: Groth16 proofs are randomised, "
        "so this is a replay or a cache"
    )


def test_an_answer_for_another_job_fails(daemon, pytester):
    daemon.behaviour["winning"] = FakeBehaviour(answer_as="someone-else")
    result = _run(daemon, pytester, Case("local", WINNING, 1, 1), proofs=1)
    (record,) = result.failed
    assert record.error == f"the answer is for job 'someone-else', not for {record.job_id!r}"


def test_why_names_each_distinct_reason_once_with_its_count(daemon, pytester):
    daemon.behaviour["winning"] = FakeBehaviour(fail="synthesis failed: randomness must be exactly 32 bytes")
    result = _run(daemon, pytester, Case("local", WINNING, 1, 2), proofs=4)
    assert result.why() == (
        "2 of 2 winning proofs failed: 2x FAILED: synthesis failed: randomness must be exactly 32 bytes"
    )


def test_requests_the_host_cannot_hold_are_refused_before_they_are_built():
    """A wave of a billion requests once grew to 7 GB before it segfaulted; now one is built and measured."""
    from pytest_cuzk.core.errors import CuzkError
    from pytest_cuzk.host.limits import available_memory
    from pytest_cuzk.proto import pb

    built: list[int] = []

    def make() -> pb.SubmitProofRequest:
        built.append(1)
        return pb.SubmitProofRequest(request_id=f"r{len(built)}", vanilla_proof=b"\0" * (1 << 20))

    runner = Runner(client=None, backend=None, make_request=make, proof_timeout_s=1, probe_timeout_s=1)  # type: ignore[arg-type]
    too_many = int(available_memory().most >> 20) + 1
    fit = r"need .*; at most \d+ fit, as this host has .* of memory available"
    with pytest.raises(CuzkError, match=rf"porep-batch1-j\d+: .* requests of 1,048,5\d\d bytes {fit}"):
        runner.requests(too_many, f"porep-batch1-j{too_many}")
    assert len(built) == 1
    assert [r.request_id for r in runner.requests(3, "three")] == ["r2", "r3", "r4"]


def test_a_proofs_record_fits_what_the_proof_count_bound_allows_for_it():
    """--cuzk-proofs is bounded by free memory at PROOF_RECORD_BYTES a proof: a real record stays under it."""
    import sys

    from pytest_cuzk.config.values import PROOF_RECORD_BYTES
    from pytest_cuzk.run.waves import ProofOutcome

    record = ProofOutcome(
        "porep-" + "x" * 64, False, 12.5, "FAILED: " + "e" * 512, 1, 2, 3, 4, 1920, True, 1e6, 0.5
    )
    deep = sys.getsizeof(record) + sys.getsizeof(record.__dict__)
    deep += sum(sys.getsizeof(v) for v in vars(record).values())
    assert deep * 2 <= PROOF_RECORD_BYTES  # twice over: its wave's copy of the figures, numpy's arrays
