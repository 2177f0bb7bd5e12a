"""The engine end to end over gRPC on 127.0.0.1: every kind, queueing, priorities, batching, cancel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.engine_support import RefData, Running, wait_until_running

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.config import FAULTS_ENV, ConfigError, parse_config
from pytest_cuzk.refengine.verify import verify_proof
from pytest_cuzk.vocab.kinds import KINDS

Status = pb.AwaitProofResponse


@pytest.mark.parametrize("kind", list(KINDS))
def test_prove_returns_a_verifying_proof_with_measured_timings(
    kind: str, start_engine: Callable[..., Running], ref_data: RefData, ref_params: Path
) -> None:
    running = start_engine(behave="protocol")
    req = ref_data.request(kind, request_id=f"prove-{kind}")
    result = running.stub.Prove(pb.ProveRequest(submit=req)).result
    assert result.status == Status.COMPLETED, result.error_message
    assert result.job_id == f"prove-{kind}"
    assert len(result.proof) == KINDS[kind].proof_len
    assert verify_proof(ref_params, KINDS[kind], req, result.proof)
    assert result.synthesis_ms > 0 and result.gpu_compute_ms > 0
    assert result.total_ms >= result.queue_wait_ms + result.synthesis_ms + result.gpu_compute_ms


def test_submit_await_timeout_and_cached_result(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    stub = start_engine(behave="protocol").stub
    job_id = stub.SubmitProof(ref_data.request("porep")).job_id
    assert len(job_id) == 36  # a UUID when request_id is empty

    early = stub.AwaitProof(pb.AwaitProofRequest(job_id=job_id, timeout_ms=50))
    assert (early.status, early.job_id, early.proof) == (Status.TIMEOUT, job_id, b"")

    done = stub.AwaitProof(pb.AwaitProofRequest(job_id=job_id))
    assert done.status == Status.COMPLETED, done.error_message
    again = stub.AwaitProof(pb.AwaitProofRequest(job_id=job_id, timeout_ms=1))
    assert again == done  # results are kept keyed by job id, like cuzk


def test_priorities_order_the_queue_and_cancel_drops_a_queued_job(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    stub = start_engine(behave="protocol").stub
    stub.SubmitProof(ref_data.request("porep", request_id="busy"))
    stub.SubmitProof(ref_data.request("porep", request_id="next"))
    wait_until_running(stub, "porep-c2", 2)  # one proving, one synthesised: the rest must queue
    stub.SubmitProof(ref_data.request("wpost", request_id="low", priority=pb.LOW))
    stub.SubmitProof(ref_data.request("wpost", request_id="doomed", priority=pb.LOW))
    stub.SubmitProof(ref_data.request("wpost", request_id="default"))  # 0 -> HIGH for WindowPoSt
    stub.SubmitProof(ref_data.request("winning", request_id="critical"))  # 0 -> CRITICAL

    assert stub.CancelProof(pb.CancelProofRequest(job_id="doomed")).was_running is False
    assert stub.CancelProof(pb.CancelProofRequest(job_id="busy")).was_running is True
    cancelled = stub.AwaitProof(pb.AwaitProofRequest(job_id="doomed"))
    assert cancelled.status == Status.CANCELLED

    results = {
        i: stub.AwaitProof(pb.AwaitProofRequest(job_id=i)) for i in ("busy", "critical", "default", "low")
    }
    assert all(r.status == Status.COMPLETED for r in results.values()), results
    waits = [results[i].queue_wait_ms for i in ("critical", "default", "low")]
    assert waits == sorted(waits), f"queue waits not in priority order: {waits}"


@pytest.mark.parametrize(("kind", "behave"), [("porep", "cuzk"), ("snap", "protocol")])
def test_two_requests_form_one_batch(
    kind: str, behave: str, start_engine: Callable[..., Running], ref_data: RefData, ref_params: Path
) -> None:
    running = start_engine(max_batch_size=2, max_batch_wait_ms=10_000, behave=behave)
    reqs = [ref_data.request(kind, request_id=f"batch-{i}", sector=i) for i in range(2)]
    for req in reqs:
        running.stub.SubmitProof(req)
    results = [running.stub.AwaitProof(pb.AwaitProofRequest(job_id=r.request_id)) for r in reqs]
    for req, result in zip(reqs, results, strict=True):
        assert result.status == Status.COMPLETED, result.error_message
        assert result.job_id == req.request_id
        assert len(result.proof) == KINDS[kind].proof_len
        assert verify_proof(ref_params, KINDS[kind], req, result.proof)
    assert results[0].proof != results[1].proof  # each caller gets its own proof
    assert not verify_proof(ref_params, KINDS[kind], reqs[0], results[1].proof)  # of its own sector
    shared = {(r.synthesis_ms, r.gpu_compute_ms) for r in results}
    assert len(shared) == 1, f"not one shared pass: {shared}"
    assert results[0].queue_wait_ms < 10_000  # the full batch flushed at once, not on the timer


def test_partial_batch_flushes_when_another_kind_arrives(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    running = start_engine(max_batch_size=4, max_batch_wait_ms=60_000)
    running.stub.SubmitProof(ref_data.request("snap", request_id="alone"))
    winning = running.stub.Prove(pb.ProveRequest(submit=ref_data.request("winning"))).result
    snap = running.stub.AwaitProof(pb.AwaitProofRequest(job_id="alone"))
    assert (snap.status, winning.status) == (Status.COMPLETED, Status.COMPLETED)
    assert snap.queue_wait_ms < 60_000


@pytest.mark.parametrize("pipelined", [True, False], ids=["pipelined", "sequential"])
def test_pipeline_overlaps_synthesis_of_the_next_proof_with_proving(
    pipelined: bool, start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    running = start_engine(pipeline_enabled=pipelined)
    for i in range(2):
        running.stub.SubmitProof(ref_data.request("winning", request_id=f"p{i}"))
    for i in range(2):
        assert running.stub.AwaitProof(pb.AwaitProofRequest(job_id=f"p{i}")).status == Status.COMPLETED
    first, second = (j for j in running.engine.jobs() if j.job_id in ("p0", "p1"))
    overlapped = second.started < first.finished
    assert overlapped is pipelined


def test_a_bad_request_fails_cleanly_and_the_engine_keeps_proving(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    stub = start_engine().stub
    bad = {
        "porep": (ref_data.request("porep", vanilla_proof=b"not json"), "C1 parse failed: "),
        "wpost": (
            ref_data.request("wpost", randomness=b"abc"),
            "synthesis failed: randomness must be exactly 32",
        ),
        "winning": (ref_data.request("winning", registered_proof=99), "synthesis failed: "),
        "snap": (
            ref_data.request("snap", comm_r_old=b""),
            "SnapDeals parse failed: comm_r_old must be exactly 32",
        ),
    }
    for kind, (req, prefix) in bad.items():
        result = stub.Prove(pb.ProveRequest(submit=req)).result
        assert result.status == Status.FAILED, kind
        assert result.error_message.startswith(prefix), (kind, result.error_message)
        assert (result.proof, result.total_ms) == (b"", 0)
    assert stub.Prove(pb.ProveRequest(submit=ref_data.request("winning"))).result.status == Status.COMPLETED
    status = stub.GetStatus(pb.GetStatusRequest())
    assert (status.total_proofs_failed, status.total_proofs_completed) == (4, 1)


def test_porep_self_check_rejects_a_wrong_miner(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    stub = start_engine().stub
    req = ref_data.request("porep")
    req.miner_id += 1
    result = stub.Prove(pb.ProveRequest(submit=req)).result
    assert result.status == Status.FAILED
    expected = f"assembled proof did not verify (sector={req.sector_number}, miner={req.miner_id})"
    assert result.error_message == f"PoRep proof self-check failed: {expected}"


def test_slow_factor_below_one_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"slow_factor must be at least 1, got 0\.5"):
        parse_config({}, "cuzk.toml", env={FAULTS_ENV: '{"slow_factor": 0.5}'})
    assert parse_config({}, "cuzk.toml", env={FAULTS_ENV: '{"slow_factor": 1.15}'}).faults.slow_factor == 1.15
