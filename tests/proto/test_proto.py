"""The committed stubs match the .proto, and the .proto matches cuzk's wire format."""

from __future__ import annotations

import importlib.util

import pytest
from google.protobuf.descriptor import FieldDescriptor

from pytest_cuzk.proto import SERVICE_NAME, pb, pb_grpc

F = FieldDescriptor
TYPE_NAMES = {
    F.TYPE_STRING: "string",
    F.TYPE_UINT64: "uint64",
    F.TYPE_UINT32: "uint32",
    F.TYPE_BOOL: "bool",
    F.TYPE_BYTES: "bytes",
    F.TYPE_ENUM: "enum",
    F.TYPE_MESSAGE: "message",
}

# (number, type, repeated) per field, as cuzk's proving.proto declares them.
WIRE = {
    "SubmitProofRequest": {
        "request_id": (1, "string", False),
        "proof_kind": (2, "enum", False),
        "sector_size": (3, "uint64", False),
        "registered_proof": (4, "uint64", False),
        "priority": (5, "enum", False),
        "vanilla_proof": (10, "bytes", False),
        "vanilla_proofs": (11, "bytes", True),
        "sector_number": (20, "uint64", False),
        "miner_id": (21, "uint64", False),
        "randomness": (22, "bytes", False),
        "partition_index": (23, "uint32", False),
        "comm_r_old": (30, "bytes", False),
        "comm_r_new": (31, "bytes", False),
        "comm_d_new": (32, "bytes", False),
    },
    "SubmitProofResponse": {
        "job_id": (1, "string", False),
        "queue_position": (2, "uint32", False),
        "assigned_gpu": (3, "string", False),
    },
    "AwaitProofRequest": {"job_id": (1, "string", False), "timeout_ms": (2, "uint64", False)},
    "AwaitProofResponse": {
        "job_id": (1, "string", False),
        "status": (2, "enum", False),
        "proof": (3, "bytes", False),
        "error_message": (4, "string", False),
        "queue_wait_ms": (10, "uint64", False),
        "srs_load_ms": (11, "uint64", False),
        "synthesis_ms": (12, "uint64", False),
        "gpu_compute_ms": (13, "uint64", False),
        "total_ms": (14, "uint64", False),
    },
    "ProveRequest": {"submit": (1, "message", False)},
    "ProveResponse": {"result": (1, "message", False)},
    "CancelProofRequest": {"job_id": (1, "string", False)},
    "CancelProofResponse": {"was_running": (1, "bool", False)},
    "GetStatusRequest": {},
    "GetStatusResponse": {
        "gpus": (1, "message", True),
        "loaded_srs": (2, "message", True),
        "queues": (3, "message", True),
        "total_proofs_completed": (4, "uint64", False),
        "total_proofs_failed": (5, "uint64", False),
        "uptime_seconds": (6, "uint64", False),
        "pinned_memory_bytes": (7, "uint64", False),
        "pinned_memory_limit_bytes": (8, "uint64", False),
    },
    "GPUStatus": {
        "ordinal": (1, "uint32", False),
        "name": (2, "string", False),
        "vram_total_bytes": (3, "uint64", False),
        "vram_free_bytes": (4, "uint64", False),
        "current_job_id": (5, "string", False),
        "current_proof_kind": (6, "string", False),
    },
    "SRSStatus": {
        "circuit_id": (1, "string", False),
        "tier": (2, "enum", False),
        "size_bytes": (3, "uint64", False),
        "ref_count": (4, "uint32", False),
    },
    "QueueStatus": {
        "proof_kind": (1, "string", False),
        "pending": (2, "uint32", False),
        "in_progress": (3, "uint32", False),
    },
    "PreloadSrsRequest": {"circuit_id": (1, "string", False)},
    "PreloadSrsResponse": {"already_loaded": (1, "bool", False), "load_time_ms": (2, "uint64", False)},
    "EvictSrsRequest": {"circuit_id": (1, "string", False)},
    "EvictSrsResponse": {"was_loaded": (1, "bool", False), "freed_bytes": (2, "uint64", False)},
    "GetMetricsRequest": {},
    "GetMetricsResponse": {"prometheus_text": (1, "string", False)},
}

RPCS = {
    "SubmitProof": ("SubmitProofRequest", "SubmitProofResponse"),
    "AwaitProof": ("AwaitProofRequest", "AwaitProofResponse"),
    "Prove": ("ProveRequest", "ProveResponse"),
    "CancelProof": ("CancelProofRequest", "CancelProofResponse"),
    "GetStatus": ("GetStatusRequest", "GetStatusResponse"),
    "GetMetrics": ("GetMetricsRequest", "GetMetricsResponse"),
    "PreloadSRS": ("PreloadSrsRequest", "PreloadSrsResponse"),
    "EvictSRS": ("EvictSrsRequest", "EvictSrsResponse"),
}


def test_committed_stubs_match_the_proto() -> None:
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip(
            "grpc_tools is not installed (pip install -e '.[dev]'), so the stubs cannot be regenerated"
        )
    from pytest_cuzk.proto.generate import stale_stubs

    assert stale_stubs() == [], "run: python -m pytest_cuzk.proto.generate"


def test_package_and_message_names() -> None:
    assert pb.DESCRIPTOR.package == "cuzk.v1"
    assert set(pb.DESCRIPTOR.message_types_by_name) == set(WIRE)


@pytest.mark.parametrize("message", sorted(WIRE))
def test_fields_are_wire_identical(message: str) -> None:
    fields = pb.DESCRIPTOR.message_types_by_name[message].fields
    got = {f.name: (f.number, TYPE_NAMES[f.type], f.is_repeated) for f in fields}
    assert got == WIRE[message]


def test_field_types_point_at_the_right_messages_and_enums() -> None:
    msgs = pb.DESCRIPTOR.message_types_by_name
    assert msgs["SubmitProofRequest"].fields_by_name["proof_kind"].enum_type.full_name == "cuzk.v1.ProofKind"
    assert msgs["SubmitProofRequest"].fields_by_name["priority"].enum_type.full_name == "cuzk.v1.Priority"
    assert msgs["ProveRequest"].fields_by_name["submit"].message_type.name == "SubmitProofRequest"
    assert msgs["ProveResponse"].fields_by_name["result"].message_type.name == "AwaitProofResponse"
    status = msgs["GetStatusResponse"].fields_by_name
    assert [status[n].message_type.name for n in ("gpus", "loaded_srs", "queues")] == [
        "GPUStatus",
        "SRSStatus",
        "QueueStatus",
    ]


def test_enum_values() -> None:
    assert dict(pb.ProofKind.items()) == {
        "PROOF_KIND_UNSPECIFIED": 0,
        "POREP_SEAL_COMMIT": 1,
        "SNAP_DEALS_UPDATE": 2,
        "WINDOW_POST_PARTITION": 3,
        "WINNING_POST": 4,
    }
    assert dict(pb.Priority.items()) == {
        "PRIORITY_UNSPECIFIED": 0,
        "LOW": 1,
        "NORMAL": 2,
        "HIGH": 3,
        "CRITICAL": 4,
    }
    assert dict(pb.AwaitProofResponse.Status.items()) == {
        "UNKNOWN": 0,
        "COMPLETED": 1,
        "FAILED": 2,
        "CANCELLED": 3,
        "TIMEOUT": 4,
    }
    assert dict(pb.SRSStatus.Tier.items()) == {"HOT": 0, "WARM": 1, "COLD": 2}


def test_service_methods_and_their_types() -> None:
    service = pb.DESCRIPTOR.services_by_name["ProvingEngine"]
    assert service.full_name == SERVICE_NAME == "cuzk.v1.ProvingEngine"
    got = {m.name: (m.input_type.name, m.output_type.name) for m in service.methods}
    assert got == RPCS
    assert not any(m.client_streaming or m.server_streaming for m in service.methods)


def test_grpc_stub_uses_the_full_method_paths() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.paths: list[str] = []

        def unary_unary(self, path: str, **_: object) -> None:
            self.paths.append(path)

    channel = Recorder()
    pb_grpc.ProvingEngineStub(channel)
    assert sorted(channel.paths) == sorted(f"/cuzk.v1.ProvingEngine/{rpc}" for rpc in RPCS)


def test_known_bytes_encode_like_cuzk() -> None:
    """Field 11 (vanilla_proofs) and the 20s/30s numbers put these exact tags on the wire."""
    req = pb.SubmitProofRequest(request_id="r", vanilla_proofs=[b"\x01"], miner_id=1000, comm_d_new=b"\x02")
    assert req.SerializeToString() == bytes.fromhex("0a0172" + "5a0101" + "a801e807" + "82020102")
