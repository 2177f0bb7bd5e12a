"""What the daemon reports about itself, and how it takes bad input, for every kind."""

from __future__ import annotations

import pytest

from pytest_cuzk.backends.protocol import DaemonBackend
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.daemon.proofcheck import check_proof
from pytest_cuzk.proto import pb
from pytest_cuzk.run.cases import Case
from pytest_cuzk.session import CuzkSession
from pytest_cuzk.vocab.kinds import ProofKindInfo


def _counters(client: ProvingClient, kind: ProofKindInfo) -> tuple[float, float, float, float]:
    metrics = client.metric_samples()
    status = client.status()
    return (
        status.total_proofs_completed,
        status.total_proofs_failed,
        metrics.value("cuzk_proofs_completed_total") or 0.0,
        metrics.value("cuzk_proofs_completed", proof_kind=kind.metric_label) or 0.0,
    )


def test_counters_move_by_the_proofs_run(
    cuzk_kind: Case, cuzk_target: DaemonBackend, cuzk_session: CuzkSession
) -> None:
    """GetStatus and GetMetrics counters move by exactly the proofs this test ran."""
    kind = cuzk_kind.kind
    data = cuzk_session.data(cuzk_target)
    with cuzk_session.client(cuzk_target) as client:
        before = _counters(client, kind)
        runs = 2
        for _ in range(runs):
            result = client.prove(data.request(kind), timeout_s=cuzk_session.settings.proof_timeout)
            assert result.completed, result.error_message
        after = _counters(client, kind)
    assert after[0] - before[0] == runs, "GetStatus total_proofs_completed"
    assert after[1] == before[1], "GetStatus total_proofs_failed moved without a failure"
    assert after[2] - before[2] == runs, "cuzk_proofs_completed_total"
    assert after[3] - before[3] == runs, f"cuzk_proofs_completed{{proof_kind={kind.metric_label}}}"


def _malformed(request: pb.SubmitProofRequest) -> pb.SubmitProofRequest:
    bad = pb.SubmitProofRequest()
    bad.CopyFrom(request)
    bad.request_id = request.request_id + "-malformed"
    if request.vanilla_proof:
        bad.vanilla_proof = request.vanilla_proof[: len(request.vanilla_proof) // 2]
    else:
        del bad.vanilla_proofs[:]
        bad.vanilla_proofs.extend(p[: len(p) // 2] for p in request.vanilla_proofs)
    return bad


def test_malformed_input_fails_cleanly_and_the_daemon_keeps_proving(
    cuzk_kind: Case, cuzk_target: DaemonBackend, cuzk_session: CuzkSession
) -> None:
    """Truncated vanilla data gives a FAILED job with a message, then a good proof still succeeds."""
    kind = cuzk_kind.kind
    timeout = cuzk_session.settings.proof_timeout
    data = cuzk_session.data(cuzk_target)
    with cuzk_session.client(cuzk_target) as client:
        bad = client.prove(_malformed(data.request(kind)), timeout_s=timeout)
        assert bad.status == pb.AwaitProofResponse.FAILED
        cuzk_session.ledger.planned_failure(cuzk_target.label)  # the summary says why the counter moved
        assert bad.error_message, "a failed job must say why"
        assert not bad.proof
        good = client.prove(data.request(kind), timeout_s=timeout)
    assert good.completed, f"daemon stopped proving after bad input: {good.error_message}"
    check_proof(good.proof, kind)


def test_cold_start_is_reported(
    cuzk_kind: Case, cuzk_target: DaemonBackend, cuzk_session: CuzkSession
) -> None:
    """The readiness chain timed every stage for this kind (skipped stages are said so)."""
    kind = cuzk_kind.kind.name
    cold = cuzk_target.state.cold[-1]
    assert kind in cold.srs_load_s
    if cuzk_session.settings.skip_warmup:
        pytest.skip("--cuzk-skip-warmup: no warm-up figures")
    assert cold.warmup_s[kind] > 0
    if cuzk_target.pce_rule() is not None:
        assert kind in cold.pce_s
