"""The data file formats of cuzk's tools: vanilla proofs, and PoRep's C1 output wrapper.

Vanilla proofs are a JSON array of base64 strings: ``cuzk-bench gen-vanilla`` writes it and
``cuzk-bench --vanilla`` reads it; like cuzk-bench, a file that is not such an array is read
as one raw proof. Each string is a bincode ``FallbackPoStSectorProof`` (PoSt) or
``PartitionProof`` (SnapDeals): at least a 32-byte commitment and two 8-byte fields, 48 bytes.
PoRep's data is the C1 output wrapper JSON Curio writes: ``SectorNum`` and ``SectorSize``
(integers) and ``Phase1Out``, base64 of filecoin-proofs-api's ``SealCommitPhase1Output`` JSON,
whose ``vanilla_proofs`` is keyed by the registered proof's shape (``{"StackedDrg32GiBV1":
[[...], ...]}``, a list of challenge proofs per partition). Base64 is read as Rust's base64
crate reads it, which is how cuzk decodes ``Phase1Out``: canonical, padded, no stray bits
(``QR==`` is refused). ``shape_problem`` says what a file lacks of that; ``format_problem``
also whether bytes are a whole file, which is how a download no sha256 pins is known complete.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

from pytest_cuzk.vocab.files import atomic_write
from pytest_cuzk.vocab.units import MAX_MESSAGE_BYTES

__all__ = [
    "b64decode",
    "format_problem",
    "largest_file",
    "read_vanilla_proofs",
    "shape_problem",
    "write_vanilla_proofs",
]

MIN_VANILLA = 48  # bytes: the smallest bincode FallbackPoStSectorProof or PartitionProof
C1_FIELDS = ("registered_proof", "vanilla_proofs", "comm_r", "comm_d", "replica_id", "seed", "ticket")
RAW = "a raw vanilla proof (not a JSON array of base64 strings): its completeness cannot be checked"


def b64decode(text: str) -> bytes:
    """Standard base64 as Rust's base64 crate decodes it; ``binascii.Error`` when it would refuse it."""
    raw = base64.b64decode(text, validate=True)
    if base64.b64encode(raw).decode() != text:
        raise binascii.Error("not canonical: padding missing or bits set past the last byte")
    return raw


def largest_file(kind: str) -> int:
    """The most bytes a data file of ``kind`` can have and still fit in a request cuzk accepts.

    PoRep's C1 wrapper is sent whole; a JSON array of base64 proofs carries 3 bytes in 4, and
    its punctuation is allowed for.
    """
    return MAX_MESSAGE_BYTES if kind == "porep" else MAX_MESSAGE_BYTES * 3 // 2


def read_vanilla_proofs(path: Path) -> list[bytes]:
    """Read a vanilla-proofs file: a JSON array of base64 strings, else the whole file as one proof."""
    raw = Path(path).read_bytes()
    try:
        items = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return [raw]
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return [raw]
    try:
        return [b64decode(i) for i in items]
    except binascii.Error as exc:
        raise ValueError(f"{path}: not a JSON array of base64 strings ({exc})") from exc


def write_vanilla_proofs(path: Path, proofs: list[bytes]) -> None:
    """Write vanilla proofs in cuzk-bench's ``--vanilla`` format."""
    atomic_write(path, json.dumps([base64.b64encode(p).decode() for p in proofs]))


def format_problem(kind: str, raw: bytes) -> str | None:
    """Why ``raw`` is not a whole data file of ``kind`` (``porep`` or a vanilla kind); None when it is.

    A raw (non-JSON) vanilla proof has no structure to check, and says so.
    """
    if kind != "porep" and not raw.lstrip().startswith(b"["):
        return RAW
    return shape_problem(kind, raw)


def shape_problem(kind: str, raw: bytes) -> str | None:
    """What ``raw`` lacks of its kind's real format, naming the field; None when it has it all.

    A raw vanilla proof (not a JSON array) is allowed, as cuzk-bench allows it.
    """
    if kind == "porep":
        return _c1_problem(raw)
    if not raw.lstrip().startswith(b"["):
        return None
    try:
        items = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        return f"not a complete JSON array of base64 strings ({exc})"
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return "not a JSON array of base64 strings"
    if not items:
        return "an empty array: a vanilla-proofs file holds one proof per sector or partition"
    for n, item in enumerate(items):
        try:
            size = len(b64decode(item))
        except binascii.Error as exc:
            return f"entry [{n}] is not base64 ({exc})"
        if size < MIN_VANILLA:
            return f"entry [{n}] is {size} bytes, too short for a vanilla proof (at least {MIN_VANILLA})"
    return None


def _c1_problem(raw: bytes) -> str | None:
    try:
        wrapper = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        return f"not complete C1 output wrapper JSON ({exc})"
    if not isinstance(wrapper, dict) or not isinstance(wrapper.get("Phase1Out"), str):
        return "not a C1 output wrapper (a JSON object with Phase1Out, SectorNum and SectorSize)"
    for name in ("SectorNum", "SectorSize"):
        value = wrapper.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            got = "missing" if name not in wrapper else f"{value!r}"
            return f"its {name} must be a non-negative integer, as Curio writes it; got {got}"
    try:
        inner = json.loads(b64decode(wrapper["Phase1Out"]))
    except binascii.Error as exc:
        return f"its Phase1Out is not base64 ({exc})"
    except (UnicodeDecodeError, ValueError) as exc:
        return f"its Phase1Out is not base64 of JSON ({exc})"
    return _phase1_problem(inner)


def _phase1_problem(inner: Any) -> str | None:
    """What a decoded Phase1Out lacks of filecoin-proofs-api's SealCommitPhase1Output."""
    if not isinstance(inner, dict):
        return "its Phase1Out is not a C1 output (SealCommitPhase1Output): not a JSON object"
    missing = [k for k in C1_FIELDS if k not in inner]
    if missing:
        return f"its Phase1Out is not a C1 output (SealCommitPhase1Output): no {', '.join(missing)}"
    vanilla = inner["vanilla_proofs"]
    if not (isinstance(vanilla, dict) and len(vanilla) == 1):
        return (
            "its Phase1Out.vanilla_proofs must be keyed by the registered proof's shape, "
            'e.g. {"StackedDrg32GiBV1": [[...], ...]}'
        )
    ((shape, parts),) = vanilla.items()
    proof = inner["registered_proof"]
    if not isinstance(proof, str) or not proof.startswith(shape):
        return f"its Phase1Out.vanilla_proofs is keyed {shape}, not the shape of registered_proof {proof!r}"
    if not isinstance(parts, list) or not parts:
        return f"its Phase1Out.vanilla_proofs.{shape} must be a non-empty list of partitions"
    for k, part in enumerate(parts):
        if not isinstance(part, list) or not part or not all(isinstance(c, dict) for c in part):
            return f"its Phase1Out.vanilla_proofs.{shape}[{k}] must be a non-empty list of challenge proofs"
    return None
