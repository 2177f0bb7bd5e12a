"""Turn test-data files into ``SubmitProofRequest`` messages, as cuzk-bench does.

PoRep data is the C1 wrapper JSON, sent whole as ``vanilla_proof``. PoSt and
SnapDeals data is a JSON array of base64 strings (cuzk-bench's ``--vanilla``
format), sent as ``vanilla_proofs``; like cuzk-bench, a file that is not such an
array is sent as one raw proof. A file is first held to what the real format
requires (``vocab.vanilla.shape_problem``), so a malformed one is named here, not
in a daemon's parse error. Request fields come from the manifest's
``[kinds.<kind>.request]`` table, with bytes fields written as hex.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from pytest_cuzk.proto import pb
from pytest_cuzk.vocab.kinds import SECTOR_SIZE_32G, ProofKindInfo
from pytest_cuzk.vocab.vanilla import read_vanilla_proofs, shape_problem

__all__ = ["BYTES_FIELDS", "INT_FIELDS", "build_request"]

BYTES_FIELDS = ("randomness", "comm_r_old", "comm_r_new", "comm_d_new")
INT_FIELDS = ("registered_proof", "sector_number", "miner_id", "partition_index", "sector_size", "priority")


def build_request(
    kind: ProofKindInfo,
    data_path: Path,
    fields: Mapping[str, Any],
    *,
    request_id: str = "",
    where: str = "request",
) -> pb.SubmitProofRequest:
    """Build the request for one proof of ``kind`` from its data file and request fields.

    ``where`` names the source of ``fields`` (e.g. ``manifest.toml [kinds.porep.request]``)
    so that a bad field is reported with where to fix it.
    """
    req = pb.SubmitProofRequest(
        request_id=request_id,
        proof_kind=cast("pb.ProofKind", kind.proof_kind),
        sector_size=SECTOR_SIZE_32G,
        registered_proof=kind.registered_proof,
    )
    for name, value in fields.items():
        if name in BYTES_FIELDS:
            try:
                setattr(req, name, bytes.fromhex(str(value)))
            except ValueError as exc:
                raise ValueError(f"{where}: field {name!r} must be hex bytes, got {value!r}") from exc
        elif name in INT_FIELDS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{where}: field {name!r} must be a non-negative integer, got {value!r}")
            setattr(req, name, value)
        else:
            known = ", ".join(INT_FIELDS + BYTES_FIELDS)
            raise ValueError(f"{where}: unknown field {name!r}; known fields: {known}")
    raw = data_path.read_bytes()
    if problem := shape_problem(kind.name, raw):
        raise ValueError(f"{data_path}: not {kind.name} data as cuzk reads it: {problem}")
    if kind.name == "porep":
        req.vanilla_proof = raw
    else:
        req.vanilla_proofs.extend(read_vanilla_proofs(data_path))
    return req
