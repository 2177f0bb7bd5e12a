"""Structure check for proof bytes from any engine, run on every proof.

cuzk returns one 192-byte Groth16 proof per partition, concatenated in partition
order; each is A (G1, 48 B) | B (G2, 96 B) | C (G1, 48 B) in the zcash/blstrs
compressed BLS12-381 encoding. Decoding every point catches truncated, padded or
bit-flipped output without needing verifying keys: py-arkworks-bls12381's
``from_compressed_bytes`` rejects non-canonical coordinates, points off the curve
and points outside the prime-order subgroup (tests pin that behaviour). The
identity point decodes fine there, so it is rejected here: an honest prover
never outputs it, and it is what zeroed buffers look like.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from py_arkworks_bls12381 import G1Point, G2Point

from pytest_cuzk.core.errors import ProofStructureError
from pytest_cuzk.vocab.kinds import GROTH16_PROOF_LEN, ProofKindInfo

__all__ = ["G1_LEN", "G2_LEN", "Groth16Points", "check_proof"]

G1_LEN = 48
G2_LEN = 96
_COMPRESSED = 0x80
_INFINITY = 0x40
# (name, offset, length, group) of the points inside one 192-byte proof.
_LAYOUT = (("A", 0, G1_LEN, G1Point), ("B", G1_LEN, G2_LEN, G2Point), ("C", G1_LEN + G2_LEN, G1_LEN, G1Point))


@dataclass(frozen=True)
class Groth16Points:
    """The decoded points of one partition's proof."""

    partition: int
    a: G1Point
    b: G2Point
    c: G1Point


def check_proof(
    proof: bytes, kind: ProofKindInfo | None = None, partitions: int | None = None
) -> list[Groth16Points]:
    """Decode every partition's A, B, C; raise ProofStructureError naming the first bad one.

    The expected length comes from ``partitions`` if given, else from ``kind``; with
    neither, any non-empty multiple of 192 bytes is accepted.
    """
    count = _partition_count(len(proof), kind, partitions)
    n = GROTH16_PROOF_LEN
    return [_decode_partition(proof[i * n : (i + 1) * n], i) for i in range(count)]


def _partition_count(length: int, kind: ProofKindInfo | None, partitions: int | None) -> int:
    if partitions is None and kind is not None:
        partitions = kind.partitions
    if partitions is not None:
        expected = partitions * GROTH16_PROOF_LEN
        if length != expected:
            what = f"{kind.name} proof" if kind is not None else "proof"
            raise ProofStructureError(
                f"{what} is {length} bytes, expected {expected} "
                f"({partitions} partitions x {GROTH16_PROOF_LEN} bytes)"
            )
        return partitions
    if length == 0 or length % GROTH16_PROOF_LEN:
        raise ProofStructureError(
            f"proof is {length} bytes, expected a non-empty multiple of {GROTH16_PROOF_LEN} "
            f"(one {GROTH16_PROOF_LEN}-byte Groth16 proof per partition)"
        )
    return length // GROTH16_PROOF_LEN


def _decode_partition(chunk: bytes, partition: int) -> Groth16Points:
    a, b, c = (_decode_point(chunk[off : off + n], group, partition, name) for name, off, n, group in _LAYOUT)
    return Groth16Points(partition=partition, a=a, b=b, c=c)  # A and C in G1, B in G2, by _LAYOUT


def _decode_point(data: bytes, group: Any, partition: int, name: str) -> Any:
    if not data[0] & _COMPRESSED:
        raise ProofStructureError("not a compressed point (flag bit 0x80 clear)", partition, name)
    if data[0] & _INFINITY:
        raise ProofStructureError("identity point (point at infinity)", partition, name)
    try:
        return group.from_compressed_bytes(data)
    except ValueError:
        raise ProofStructureError(_why_invalid(data, group), partition, name) from None


def _why_invalid(data: bytes, group: Any) -> str:
    """Tell an off-curve encoding from an on-curve point outside the prime-order subgroup."""
    curve = "G1" if group is G1Point else "G2"
    try:
        group.from_compressed_bytes_unchecked(data)
    except ValueError:
        return f"not a point on the {curve} curve (invalid or non-canonical encoding)"
    return f"on the curve but not in the {curve} prime-order subgroup"
