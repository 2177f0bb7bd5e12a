"""The C1 wrapper JSON that carries a PoRep's vanilla proofs, as cuzk receives it.

``{"SectorNum": n, "Phase1Out": base64(inner JSON), "SectorSize": 34359738368}``;
the inner JSON is described in ``porep``. Its ``vanilla_proofs`` has the real
shape, filecoin-proofs-api's ``VanillaSealProof`` as serde writes it: keyed by
the registered proof's shape, a list per partition of one proof per challenge
(``{"StackedDrg32GiBV1": [[challenge, ...], ...]}``). Parsing follows cuzk's
order and messages: wrapper, base64, inner JSON, sector size, then the
commitments; a real seal's challenge proofs (``comm_d_proofs``, ...) are named
as such, since only ``cuzk-ref gen-data``'s small circuits can be proved here.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.circuits import JobInputError, Preset
from pytest_cuzk.refengine.circuits.porep import PARENTS, Challenge, PorepWitness, challenges, replica_id
from pytest_cuzk.refengine.field import R, fr_to_bytes
from pytest_cuzk.vocab.kinds import SECTOR_SIZE_32G

__all__ = ["PARTITIONS", "PorepInputs", "encode", "parse"]

PARTITIONS = 10
REGISTERED_PROOF = "StackedDrg32GiBV1_1"
SHAPE = "StackedDrg32GiBV1"  # the VanillaSealProof variant of every 32 GiB registered proof
_REAL = ("comm_d_proofs", "comm_r_last_proof", "replica_column_proofs", "labeling_proofs", "encoding_proof")
_SIZES = {"2KiB": 2048, "8MiB": 8 << 20, "512MiB": 512 << 20, "32GiB": 32 << 30, "64GiB": 64 << 30}
_FAIL = "C1 parse failed: "
_BAD_INNER = _FAIL + "failed to deserialize SealCommitPhase1Output from JSON"


@dataclass(frozen=True)
class Partition:
    """One partition's vanilla proof."""

    comm_c: int
    comm_r_last: int
    nodes: tuple[Challenge, ...]


@dataclass(frozen=True)
class PorepInputs:
    """A parsed PoRep request: the C1 data plus the request's miner and sector."""

    preset: Preset
    c1_replica_id: int
    request_replica_id: int
    comm_d: int
    comm_r: int
    seed: bytes
    parts: tuple[Partition, ...]
    partitions: int = PARTITIONS

    def witness(self, k: int) -> PorepWitness:
        """Partition k's witness, built from the C1 data alone."""
        part, rid = self.parts[k], self.c1_replica_id
        chs = challenges(rid, self.seed, k, self.preset)
        return PorepWitness(rid, self.comm_d, self.comm_r, part.comm_c, part.comm_r_last, chs, part.nodes)

    def public_inputs(self, k: int) -> list[int]:
        """What a verifier expects for partition k: replica_id from the request's miner and sector."""
        rid = self.request_replica_id
        return [rid, self.comm_d, self.comm_r, *challenges(rid, self.seed, k, self.preset)]


def _b32(v: Any, what: str) -> bytes:
    if not (isinstance(v, list) and len(v) == 32 and all(isinstance(x, int) and 0 <= x < 256 for x in v)):
        raise ValueError(f"{what}: expected an array of 32 byte values")
    return bytes(v)


def _fr(v: bytes, what: str) -> int:
    x = int.from_bytes(v, "little")
    if x >= R:
        raise ValueError(f"{what} is not a valid field element")
    return x


def _hex_fr(v: Any, what: str) -> int:
    if not isinstance(v, str) or len(v) != 64:
        raise ValueError(f"{what}: expected 64 hex digits")
    return _fr(bytes.fromhex(v), what)


def _partition(chs: Any, p: Preset, k: int) -> Partition:
    where = f"vanilla_proofs.{SHAPE}[{k}]"
    if not isinstance(chs, list) or not all(isinstance(c, dict) for c in chs):
        raise TypeError(f"{where} must be an array of challenge proofs")
    if chs and all(name in chs[0] for name in _REAL):
        raise ValueError(
            f"{where}[0] is a real seal's challenge proof ({', '.join(_REAL)}): cuzk-ref proves only its "
            "own small circuits, on data from `cuzk-ref gen-data`"
        )
    if len(chs) != p.porep_challenges:
        raise ValueError(f"{where}: {len(chs)} challenges, the '{p.name}' preset proves {p.porep_challenges}")
    roots = {(c["comm_c"], c["comm_r_last"]) for c in chs}
    if len(roots) != 1:
        raise ValueError(f"{where}: its challenge proofs disagree on comm_c and comm_r_last")
    nodes = []
    for j, c in enumerate(chs):
        where = f"vanilla_proofs.{SHAPE}[{k}][{j}]"
        paths = {}
        for name in ("data_path", "label_path", "replica_path"):
            if len(c[name]) != p.tree_depth:
                raise ValueError(f"{where}.{name}: expected {p.tree_depth} siblings")
            paths[name] = tuple(_hex_fr(x, f"{where}.{name}") for x in c[name])
        if len(c["parents"]) != PARENTS:
            raise ValueError(f"{where}.parents: expected {PARENTS} labels")
        parents = tuple(_hex_fr(x, f"{where}.parents") for x in c["parents"])
        nodes.append(Challenge(_hex_fr(c["data"], where), _hex_fr(c["label"], where), parents, **paths))
    comm_c, comm_r_last = next(iter(roots))
    return Partition(_hex_fr(comm_c, where), _hex_fr(comm_r_last, where), tuple(nodes))


def _inner(raw: bytes) -> dict:
    try:
        wrapper = json.loads(raw)
        phase1 = wrapper["Phase1Out"]
        size = wrapper.get("SectorSize", 0)
        if not isinstance(phase1, str) or not isinstance(size, int):
            raise TypeError("Phase1Out must be a string and SectorSize an integer")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise JobInputError(_FAIL + "failed to parse C1 output wrapper JSON") from None
    try:
        payload = base64.b64decode(phase1, validate=True)
    except (binascii.Error, ValueError):
        raise JobInputError(_FAIL + "failed to decode base64 Phase1Output") from None
    try:
        inner = json.loads(payload)
        proof_type = inner["registered_proof"]
    except (ValueError, KeyError, TypeError):
        raise JobInputError(_BAD_INNER) from None
    got = next((b for name, b in _SIZES.items() if name in str(proof_type)), size)
    if size != SECTOR_SIZE_32G or got != SECTOR_SIZE_32G:
        bad = size if size != SECTOR_SIZE_32G else got
        raise JobInputError(
            _FAIL + f"pipelined synthesis currently supports only 32 GiB sectors, got {bad} bytes"
        )
    return inner


def parse(req: pb.SubmitProofRequest, p: Preset) -> PorepInputs:
    """Validate and decode a PoRep request with cuzk's messages."""
    inner = _inner(req.vanilla_proof)
    try:
        fields = {k: _b32(inner[k], k) for k in ("comm_r", "comm_d", "replica_id", "seed", "ticket")}
        comm_r, comm_d = _fr(fields["comm_r"], "comm_r"), _fr(fields["comm_d"], "comm_d")
        c1_rid = _fr(fields["replica_id"], "replica_id")
        vanilla = inner["vanilla_proofs"]
        if not isinstance(vanilla, dict) or list(vanilla) != [SHAPE]:
            got = list(vanilla) if isinstance(vanilla, dict) else type(vanilla).__name__
            raise TypeError(
                f'vanilla_proofs must be keyed by the proof\'s shape, {{"{SHAPE}": [[...], ...]}}, '
                f"as filecoin-proofs-api writes it; got {got}"
            )
        parts = tuple(_partition(obj, p, k) for k, obj in enumerate(vanilla[SHAPE]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise JobInputError(f"{_BAD_INNER}: {exc}") from None
    for name in ("comm_d", "comm_r", "seed"):
        if not any(fields[name]):
            raise JobInputError(_FAIL + f"invalid {name}: all zeros")
    if len(parts) != PARTITIONS:
        raise JobInputError(_FAIL + f"expected {PARTITIONS} partition vanilla proofs, got {len(parts)}")
    rid = replica_id(req.miner_id, req.sector_number, fields["ticket"], comm_d)
    return PorepInputs(p, c1_rid, rid, comm_d, comm_r, fields["seed"], parts)


def _hex(x: int) -> str:
    return fr_to_bytes(x).hex()


def encode(inputs: dict[str, bytes], parts: list[Partition], sector_num: int) -> bytes:
    """The C1 wrapper JSON for ``inputs`` (comm_r, comm_d, replica_id, seed, ticket) and partitions."""
    vanilla = [
        [
            {
                "comm_c": _hex(part.comm_c),
                "comm_r_last": _hex(part.comm_r_last),
                "data": _hex(n.data),
                "label": _hex(n.label),
                "parents": [_hex(x) for x in n.parents],
                "data_path": [_hex(x) for x in n.data_path],
                "label_path": [_hex(x) for x in n.label_path],
                "replica_path": [_hex(x) for x in n.replica_path],
            }
            for n in part.nodes
        ]
        for part in parts
    ]
    inner: dict[str, Any] = {"registered_proof": REGISTERED_PROOF, "vanilla_proofs": {SHAPE: vanilla}}
    inner.update({k: list(v) for k, v in inputs.items()})
    phase1 = base64.b64encode(json.dumps(inner, sort_keys=True).encode()).decode()
    return json.dumps({"SectorNum": sector_num, "Phase1Out": phase1, "SectorSize": SECTOR_SIZE_32G}).encode()
