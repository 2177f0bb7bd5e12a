"""Proof faults and the engine's own checks: no invalid proof is COMPLETED unless a fault plants one."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.engine_support import RefData, Running

from pytest_cuzk.daemon.proofcheck import check_proof
from pytest_cuzk.proto import pb
from pytest_cuzk.refengine import faults
from pytest_cuzk.refengine.config import Faults
from pytest_cuzk.refengine.verify import verify_proof
from pytest_cuzk.vocab.kinds import KINDS

Status = pb.AwaitProofResponse
# Byte offset of the first challenge's leaf (its least significant byte) in a vanilla blob.
FIRST_LEAF = {"snap": 4 + 3 * 32 + 4, "wpost": 4 + 8 + 3 * 32 + 4, "winning": 4 + 8 + 3 * 32 + 4}
TITLES = {"snap": "SnapDeals", "wpost": "WindowPoSt", "winning": "WinningPoSt"}


@pytest.mark.parametrize("kind", list(FIRST_LEAF))
def test_one_changed_leaf_is_failed_by_the_self_check_not_completed(
    kind: str, start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    req = ref_data.request(kind)
    blob = bytearray(req.vanilla_proofs[0])
    blob[FIRST_LEAF[kind]] ^= 1  # still a field element: the witness no longer satisfies the circuit
    req.vanilla_proofs[0] = bytes(blob)
    result = start_engine().stub.Prove(pb.ProveRequest(submit=req)).result
    assert (result.status, result.proof) == (Status.FAILED, b"")
    assert result.error_message == f"{TITLES[kind]} proof self-check failed: partition 0 did not verify"


def test_invalid_at_proof_answers_a_well_formed_proof_that_does_not_verify(
    start_engine: Callable[..., Running], ref_data: RefData, ref_params: Path
) -> None:
    stub = start_engine(faults=Faults(invalid_at_proof=2)).stub
    reqs = [ref_data.request("porep", sector=i) for i in range(2)]
    results = [stub.Prove(pb.ProveRequest(submit=r)).result for r in reqs]
    assert [r.status for r in results] == [Status.COMPLETED] * 2
    for r in results:
        check_proof(r.proof, KINDS["porep"])  # valid, in-subgroup points both times
    assert [
        verify_proof(ref_params, KINDS["porep"], q, r.proof) for q, r in zip(reqs, results, strict=True)
    ] == [
        True,
        False,
    ]


def test_swap_batch_proofs_gives_each_job_the_other_ones_proof(
    start_engine: Callable[..., Running], ref_data: RefData, ref_params: Path
) -> None:
    stub = start_engine(
        max_batch_size=2, max_batch_wait_ms=10_000, faults=Faults(swap_batch_proofs=True)
    ).stub
    reqs = [ref_data.request("porep", request_id=f"b{i}", sector=i) for i in range(2)]
    for req in reqs:
        stub.SubmitProof(req)
    a, b = (stub.AwaitProof(pb.AwaitProofRequest(job_id=r.request_id)) for r in reqs)
    assert (a.status, b.status) == (Status.COMPLETED, Status.COMPLETED)
    porep = KINDS["porep"]
    assert not verify_proof(ref_params, porep, reqs[0], a.proof)
    assert verify_proof(ref_params, porep, reqs[0], b.proof) and verify_proof(
        ref_params, porep, reqs[1], a.proof
    )


def test_slow_factor_makes_every_proof_take_that_many_times_as_long(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    def total_ms(running: Running, i: int) -> float:
        req = ref_data.request("winning", request_id=f"slow-{id(running)}-{i}")
        result = running.stub.Prove(pb.ProveRequest(submit=req)).result
        assert result.status == Status.COMPLETED, result.error_message
        return float(result.synthesis_ms + result.gpu_compute_ms)

    plain, slowed = start_engine(), start_engine(faults=Faults(slow_factor=2.0))
    # One proof of each in turn, judged by the median of each pair's ratio: the two proofs of a
    # pair see nearly the same load. The fastest of each was not enough: on a loaded 2-core host
    # the slowed engine once met a quiet moment that the plain one never did (ratio 1.38).
    times = [(total_ms(plain, i), total_ms(slowed, i)) for i in range(9)]
    ratio = statistics.median(slow / fast for fast, slow in times)
    assert 1.5 <= ratio <= 2.7, times


def test_slow_factor_stretches_every_stage_of_a_proof_the_self_check_too(
    start_engine: Callable[..., Running], ref_data: RefData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted 10% must be 10% of the engine's whole time for a proof, or the gate sees less."""
    stages: list[str] = []
    real = faults.slow_down

    def recorded(config: Faults, stage_s: float) -> float:
        stages.append(threading.current_thread().name)
        return real(config, stage_s)

    monkeypatch.setattr(faults, "slow_down", recorded)
    result = (
        start_engine(faults=Faults(slow_factor=1.1))
        .stub.Prove(pb.ProveRequest(submit=ref_data.request("winning")))
        .result
    )
    assert result.status == Status.COMPLETED, result.error_message
    # synthesis on a synthesis worker; the prove pass, then the self-check, on the prove worker
    assert stages == ["ref-synth-0", "ref-prove-0", "ref-prove-0"]


@pytest.mark.parametrize("fifo", [False, True], ids=["priorities", "fifo"])
def test_a_post_behind_queued_porep_runs_next_unless_priorities_are_ignored(
    fifo: bool, start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    running = start_engine(faults=Faults(fifo=fifo))
    stub = running.stub
    for i in range(3):  # one proving, one synthesised (the look-ahead), one waiting in the queue
        stub.SubmitProof(ref_data.request("porep", request_id=f"porep-{i}"))
    deadline = time.monotonic() + 30
    while running.engine.queue_depth() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    stub.SubmitProof(ref_data.request("winning", request_id="winning"))  # CRITICAL by default
    done = {}
    for job_id in ("winning", *(f"porep-{i}" for i in range(3))):
        result = stub.AwaitProof(pb.AwaitProofRequest(job_id=job_id))
        assert result.status == Status.COMPLETED, result.error_message
        done[job_id] = next(j.finished for j in running.engine.jobs() if j.job_id == job_id)
    order = sorted(done, key=done.__getitem__)
    if fifo:
        assert order[-1] == "winning", order  # waited behind every PoRep
    else:
        assert order.index("winning") == 2, order  # after the two already started, before the queued one
