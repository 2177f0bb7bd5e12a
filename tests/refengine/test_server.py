"""The gRPC surface: listen addresses, cuzk's error codes, status, SRS, metrics and HTTP /status."""

from __future__ import annotations

import socket
import stat
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import grpc
import pytest
import requests
from helpers.engine_support import RefData, Running
from prometheus_client.parser import text_string_to_metric_families

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.server import bind_target
from pytest_cuzk.refengine.status_http import start_status_server
from pytest_cuzk.vocab.addresses import ListenTarget
from pytest_cuzk.vocab.kinds import KINDS

Status = pb.AwaitProofResponse


@pytest.mark.parametrize(
    ("listen", "target"),
    [("127.0.0.1:9820", "127.0.0.1:9820"), ("0.0.0.0:0", "0.0.0.0:0"), ("[::1]:9820", "[::1]:9820")],
)
def test_literal_ip_addresses_are_accepted(listen: str, target: str) -> None:
    assert bind_target(listen) == ListenTarget(target, None)


@pytest.mark.parametrize("listen", ["localhost:9820", "127.0.0.1", "::1:9820", "127.0.0.1:70000", "unix://"])
def test_hostnames_and_malformed_addresses_are_rejected(listen: str) -> None:
    with pytest.raises(ValueError, match="invalid listen address"):
        bind_target(listen)


def test_unix_socket_replaces_a_stale_socket_and_proves(
    start_engine: Callable[..., Running], ref_data: RefData, socket_dir: Path
) -> None:
    path = socket_dir / "run" / "cuzk.sock"
    path.parent.mkdir()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # leaves the socket file behind, as a killed daemon would
    running = start_engine(listen=f"unix://{path}")
    assert running.address == f"unix://{path}"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    result = running.stub.Prove(pb.ProveRequest(submit=ref_data.request("winning"))).result
    assert result.status == Status.COMPLETED, result.error_message


def test_cuzk_error_codes_and_messages(start_engine: Callable[..., Running]) -> None:
    stub = start_engine().stub
    calls = [
        (
            lambda: stub.SubmitProof(pb.SubmitProofRequest(proof_kind=0)),
            "INVALID_ARGUMENT",
            "invalid proof_kind: 0",
        ),
        (
            lambda: stub.SubmitProof(pb.SubmitProofRequest(proof_kind=9)),
            "INVALID_ARGUMENT",
            "invalid proof_kind: 9",
        ),
        (lambda: stub.Prove(pb.ProveRequest()), "INVALID_ARGUMENT", "missing submit field"),
        (lambda: stub.AwaitProof(pb.AwaitProofRequest(job_id="gone")), "NOT_FOUND", "job not found: gone"),
        (
            lambda: stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="nope")),
            "INTERNAL",
            "unknown circuit ID: nope",
        ),
    ]
    for call, code, message in calls:
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert (info.value.code().name, info.value.details()) == (code, message)
    assert stub.CancelProof(pb.CancelProofRequest(job_id="gone")).was_running is False
    assert stub.EvictSRS(pb.EvictSrsRequest(circuit_id="nope")) == pb.EvictSrsResponse()


def test_requests_above_grpcs_default_4_mib_are_accepted(start_engine: Callable[..., Running]) -> None:
    stub = start_engine().stub
    req = pb.SubmitProofRequest(proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=b"x" * (6 << 20))
    result = stub.Prove(pb.ProveRequest(submit=req)).result
    assert result.status == Status.FAILED
    assert result.error_message.startswith("C1 parse failed: ")


def test_preload_and_evict_really_load_and_free(start_engine: Callable[..., Running]) -> None:
    stub = start_engine(behave="protocol").stub
    first = stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="winning-32g"))
    again = stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="winning-32g"))
    assert first.already_loaded is False
    assert (again.already_loaded, again.load_time_ms) == (True, 0)
    [srs] = stub.GetStatus(pb.GetStatusRequest()).loaded_srs
    assert (srs.circuit_id, srs.tier) == ("winning-32g", pb.SRSStatus.HOT)
    assert srs.size_bytes > 0
    evicted = stub.EvictSRS(pb.EvictSrsRequest(circuit_id="winning-32g"))
    assert (evicted.was_loaded, evicted.freed_bytes) == (True, srs.size_bytes)
    assert not stub.GetStatus(pb.GetStatusRequest()).loaded_srs
    assert stub.EvictSRS(pb.EvictSrsRequest(circuit_id="winning-32g")).was_loaded is False


def test_status_reports_queues_counters_and_gpus(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    stub = start_engine(behave="protocol").stub
    stub.Prove(pb.ProveRequest(submit=ref_data.request("winning")))
    status = stub.GetStatus(pb.GetStatusRequest())
    assert [q.proof_kind for q in status.queues] == [k.status_name for k in KINDS.values()]
    assert all(q.pending == q.in_progress == 0 for q in status.queues)
    assert (status.total_proofs_completed, status.total_proofs_failed) == (1, 0)
    assert [s.circuit_id for s in status.loaded_srs] == ["winning-32g"]
    assert len(status.gpus) == nvml_gpu_count()


def nvml_gpu_count() -> int:
    """GPUs NVML sees here (0 when there is no driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


CUZK_SAMPLES = [
    "cuzk_proofs_completed_total",
    "cuzk_proofs_failed_total",
    "cuzk_uptime_seconds",
    "cuzk_queue_depth",
    "cuzk_proofs_completed",
    "cuzk_proofs_failed",
    "cuzk_proof_duration_seconds_count",
    "cuzk_proof_duration_seconds_sum",
    "cuzk_running_jobs",
    "cuzk_gpu_workers",
]


@pytest.mark.parametrize("behave", ["protocol", "cuzk"])
def test_metrics_have_cuzks_names_labels_and_order_then_the_engines_info(
    behave: str, start_engine: Callable[..., Running], ref_data: RefData, ref_params: Path
) -> None:
    running = start_engine(behave=behave)
    stub = running.stub
    stub.Prove(pb.ProveRequest(submit=ref_data.request("winning")))
    stub.Prove(pb.ProveRequest(submit=ref_data.request("wpost", randomness=b"short")))
    text = stub.GetMetrics(pb.GetMetricsRequest()).prometheus_text
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    names = list(dict.fromkeys(s.name for s in samples))
    assert names == [*CUZK_SAMPLES, "cuzk_ref_info", "cuzk_ref_phase_seconds_total"]
    by_name = {(s.name, s.labels.get("proof_kind")): s.value for s in samples}
    assert by_name[("cuzk_proofs_completed_total", None)] == 1
    assert by_name[("cuzk_proofs_failed", "window_post")] == 1
    assert by_name[("cuzk_proofs_completed", "winning_post")] == 1
    assert by_name[("cuzk_proof_duration_seconds_count", "winning_post")] == 1
    # cuzk: every GPU (GPU 0 when none is found) once per worker, two per GPU by default
    workers = 1 if behave == "protocol" else 2 * max(1, nvml_gpu_count())
    assert by_name[("cuzk_gpu_workers", None)] == workers
    assert "# TYPE cuzk_proof_duration_seconds summary" in text
    [info] = [s for s in samples if s.name == "cuzk_ref_info"]
    assert info.value == 1
    assert info.labels == {
        "version": metadata.version("pytest-cuzk"),
        "preset": "default",
        "behave": behave,
        "param_cache": str(ref_params),
        "prover": running.engine.prover.prover_label,
    }
    # where the proofs' time went: the prover's own phase totals, as counters a run's summary subtracts
    phases = {s.labels["phase"]: s.value for s in samples if s.name == "cuzk_ref_phase_seconds_total"}
    assert phases.keys() == running.engine.prover.timings().keys() >= {"prove: MSM", "self-check"}
    assert all(seconds > 0 for seconds in phases.values())
    assert "# TYPE cuzk_ref_phase_seconds_total counter" in text


def test_http_status_has_cuzks_keys_and_404s_elsewhere(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    running = start_engine()
    running.stub.Prove(pb.ProveRequest(submit=ref_data.request("snap", request_id="snap-1")))
    server = start_status_server(running.engine, "127.0.0.1:0")
    assert server is not None
    try:
        reply = requests.get(f"http://{server.address}/status?x=1", timeout=5)
        missing = requests.get(f"http://{server.address}/metrics", timeout=5)
    finally:
        server.stop()
    assert reply.status_code == 200
    assert reply.headers["Access-Control-Allow-Origin"] == "*"
    body = reply.json()
    keys = [
        "uptime_secs",
        "memory",
        "synthesis",
        "pipelines",
        "gpu_workers",
        "allocations",
        "counters",
        "buffers",
    ]
    assert list(body) == keys
    [pipeline] = body["pipelines"]
    assert (pipeline["job_id"], pipeline["proof_kind"], pipeline["partitions_done"]) == (
        "snap-1",
        "snap-update",
        16,
    )
    assert body["counters"]["completed_by_kind"] == {"snap-update": 1}
    assert [a["circuit_id"] for a in body["allocations"]["srs"]] == ["snap-32g"]
    assert (missing.status_code, missing.text) == (404, "404 Not Found\n")


def test_a_huge_id_is_clipped_in_the_error_so_the_answer_stays_small(
    start_engine: Callable[..., Running],
) -> None:
    stub = start_engine().stub
    huge = "x" * 100_000
    for call, code in (
        (lambda: stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id=huge)), "INTERNAL"),
        (lambda: stub.AwaitProof(pb.AwaitProofRequest(job_id=huge)), "NOT_FOUND"),
    ):
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code().name == code  # not RESOURCE_EXHAUSTED on the metadata's size
        assert info.value.details().endswith("... (100000 characters)")
        assert len(info.value.details()) < 200


def test_the_protocol_store_keeps_the_last_results_and_cuzks_keeps_all() -> None:
    import threading

    from pytest_cuzk.refengine.jobs import Job, JobStore

    for keep, kept in ((2, ["j1", "j2"]), (None, ["j0", "j1", "j2"])):
        store = JobStore(threading.Condition(), keep)
        for i in range(3):
            job = Job(f"j{i}", KINDS["winning"], pb.SubmitProofRequest(), 4, i)
            store.finish(job, pb.AwaitProofResponse(job_id=job.job_id, status=Status.FAILED))
        assert list(store.results) == kept
        if keep:
            with pytest.raises(KeyError, match="job not found: j0"):
                store.lookup("j0")
