"""The cuzk behaviour (the default) over gRPC: what a client sees of cuzk where it fails the proto."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from helpers.engine_support import RefData, Running, wait_for_status, wait_until_none_queued
from test_server import nvml_gpu_count as gpus_here

from pytest_cuzk.proto import pb, pb_grpc
from pytest_cuzk.refengine.config import Faults
from pytest_cuzk.refengine.server import MAX_MESSAGE_BYTES
from pytest_cuzk.refengine.verify import verify_proof
from pytest_cuzk.vocab.kinds import KINDS

Status = pb.AwaitProofResponse


def test_await_ignores_timeout_ms_and_cancel_and_evict_do_nothing(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    stub = start_engine(faults=Faults(hang_at_proof=1)).stub
    job = stub.SubmitProof(ref_data.request("winning", request_id="hung")).job_id
    stub.SubmitProof(ref_data.request("winning", request_id="synthesised"))  # waits for the prove worker
    # Both taken from the queue before the third comes (a fresh key cache makes the first job slow).
    wait_until_none_queued(stub, "winning-post", timeout=120)
    queued = stub.SubmitProof(ref_data.request("winning", request_id="queued")).job_id
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as info:  # only the client's deadline ends the wait
        stub.AwaitProof(pb.AwaitProofRequest(job_id=job, timeout_ms=50), timeout=1.0)
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - t0 >= 0.9
    assert stub.CancelProof(pb.CancelProofRequest(job_id=queued)).was_running is False
    [queue] = stub.GetStatus(pb.GetStatusRequest()).queues
    assert (queue.proof_kind, queue.pending) == ("winning-post", 1)  # the "cancelled" job still waits
    stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="winning-32g"))
    assert stub.EvictSRS(pb.EvictSrsRequest(circuit_id="winning-32g")) == pb.EvictSrsResponse()


def test_ids_prove_answers_empty_and_a_reused_id_gets_the_earlier_result(
    start_engine: Callable[..., Running], ref_data: RefData, ref_params: Path
) -> None:
    stub = start_engine().stub
    submitted = stub.SubmitProof(ref_data.request("winning")).job_id
    assert uuid.UUID(submitted).version == 4
    proved = stub.Prove(pb.ProveRequest(submit=ref_data.request("winning"))).result
    assert (proved.status, proved.job_id) == (Status.COMPLETED, "")

    first_req = ref_data.request("winning", request_id="reused")
    first = stub.Prove(pb.ProveRequest(submit=first_req)).result
    second_req = ref_data.request("winning", request_id="reused", sector=1)
    stub.SubmitProof(second_req)  # runs again, but AwaitProof finds the stored result first
    stale = stub.AwaitProof(pb.AwaitProofRequest(job_id="reused"), timeout=5)
    assert stale.proof == first.proof
    assert verify_proof(ref_params, KINDS["winning"], first_req, stale.proof)
    assert not verify_proof(ref_params, KINDS["winning"], second_req, stale.proof)


def test_status_counts_as_cuzk_does(
    start_engine: Callable[..., Running], ref_data: RefData, nvml_gpu_count: int
) -> None:
    running = start_engine(faults=Faults(hang_at_proof=1))
    stub = running.stub
    stub.SubmitProof(ref_data.request("porep", request_id="stuck"))  # holds the prove worker for ever
    stub.SubmitProof(ref_data.request("porep", request_id="next"))
    stub.SubmitProof(ref_data.request("porep", request_id="queued"))
    stub.SubmitProof(ref_data.request("wpost", request_id="ahead"))  # HIGH: synthesised next, then waits
    # Two porep jobs queued, "stuck" in the prove worker, "ahead" synthesised (so no longer listed). A
    # cold key cache on a busy 2-core host takes many seconds before the first synthesis: wait for that.
    expected = [("porep-c2", 2, 1)]

    def queues(status: pb.GetStatusResponse) -> list[tuple[str, int, int]]:
        return [(q.proof_kind, q.pending, q.in_progress) for q in status.queues]

    wait_for_status(stub, lambda s: queues(s) == expected, 120, f"the queues never became {expected}")
    stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="winning-32g"))
    status = stub.GetStatus(pb.GetStatusRequest())
    assert queues(status) == expected  # only kinds with jobs waiting; in_progress: the prove worker's job
    # Only what PreloadSRS loaded, size and ref count 0 (the PoRep key is loaded too).
    assert [(s.circuit_id, s.size_bytes, s.ref_count) for s in status.loaded_srs] == [("winning-32g", 0, 0)]
    # Each GPU once per worker (two by default), "GPU 0" when none is found; worker 0 is busy.
    assert len(status.gpus) == 2 * max(1, nvml_gpu_count)
    assert (status.gpus[0].current_job_id, status.gpus[1].current_job_id) == ("stuck", "")
    if not nvml_gpu_count:
        assert {(g.ordinal, g.name, g.vram_total_bytes) for g in status.gpus} == {(0, "GPU 0", 0)}
    assert (status.pinned_memory_bytes, status.pinned_memory_limit_bytes) == (0, 0)


def test_timings_are_sums_over_partitions_and_srs_load_is_zero(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    stub = start_engine().stub
    porep = stub.Prove(pb.ProveRequest(submit=ref_data.request("porep"))).result  # loads the key
    winning = stub.Prove(pb.ProveRequest(submit=ref_data.request("winning"))).result
    assert (porep.status, winning.status) == (Status.COMPLETED, Status.COMPLETED)
    assert porep.srs_load_ms == winning.srs_load_ms == 0
    # 10 partitions, each proved through the whole pass: their summed GPU time exceeds the wall time.
    assert porep.gpu_compute_ms > porep.total_ms
    # Not partitioned: the queue wait is what the rest leaves of the total.
    parts = winning.queue_wait_ms + winning.synthesis_ms + winning.gpu_compute_ms
    assert abs(parts - winning.total_ms) <= 2


def test_a_snapdeals_batch_fails_whole_as_cuzks_does(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    stub = start_engine(max_batch_size=2, max_batch_wait_ms=1500).stub
    for i in range(2):
        stub.SubmitProof(ref_data.request("snap", request_id=f"snap-{i}", sector=i))
    results = [stub.AwaitProof(pb.AwaitProofRequest(job_id=f"snap-{i}")) for i in range(2)]
    expected = (
        "proof split failed: proof bytes length mismatch: got 3072, expected 0 (0 partitions × 192 bytes)"
    )
    assert [(r.status, r.error_message) for r in results] == [(Status.FAILED, expected)] * 2
    alone = stub.Prove(pb.ProveRequest(submit=ref_data.request("snap"))).result  # a batch of one proves
    assert alone.status == Status.COMPLETED, alone.error_message


@pytest.mark.parametrize(
    ("behave", "code", "message"),
    [
        ("cuzk", "OUT_OF_RANGE", f"Error, decoded message length too large: found {{n}} bytes, the limit is: "
         f"{MAX_MESSAGE_BYTES} bytes"),
        ("protocol", "RESOURCE_EXHAUSTED", "Received message larger than max"),
    ],
)  # fmt: skip
def test_an_oversized_request_gets_the_servers_error(
    behave: str, code: str, message: str, start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    running = start_engine(behave=behave)
    req = ref_data.request("winning", randomness=b"\0" * (MAX_MESSAGE_BYTES + 1))
    big = [("grpc.max_send_message_length", 2 * MAX_MESSAGE_BYTES)]  # like Go's client (256 MiB)
    with grpc.insecure_channel(running.address, options=big) as channel:
        stub = pb_grpc.ProvingEngineStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.SubmitProof(req, timeout=60)
    assert info.value.code().name == code
    assert message.format(n=req.ByteSize()) in info.value.details()


@pytest.fixture
def nvml_gpu_count() -> int:
    return gpus_here()
