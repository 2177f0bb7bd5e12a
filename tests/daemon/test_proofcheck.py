"""The Groth16 proof structure check on valid points and on corrupted bytes."""

from __future__ import annotations

import pytest
from helpers.engine_support import FP
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from pytest_cuzk.core.errors import ProofStructureError
from pytest_cuzk.daemon.proofcheck import G1_LEN, G2_LEN, check_proof
from pytest_cuzk.vocab.kinds import KINDS

OFFSETS = {"A": 0, "B": G1_LEN, "C": G1_LEN + G2_LEN}


def groth16_proof(seed: int) -> bytes:
    """Build a structurally valid 192-byte proof: A, C in G1 and B in G2, scalars derived from seed."""
    a = G1Point() * Scalar(seed * 3 + 1)
    b = G2Point() * Scalar(seed * 5 + 2)
    c = G1Point() * Scalar(seed * 7 + 3)
    return a.to_compressed_bytes() + b.to_compressed_bytes() + c.to_compressed_bytes()


def compressed_x(x: int, size: int) -> bytes:
    """Compressed encoding of the point with x-coordinate ``x`` (c0 of an Fp2 x for G2), y sign bit clear."""
    raw = bytearray(x.to_bytes(size, "big"))
    raw[0] |= 0x80
    return bytes(raw)


def first_x(group: type, size: int, on_curve: bool) -> bytes:
    """Return the first small x whose encoding is (on_curve=True) or is not (False) a point on the curve."""
    for x in range(1, 1000):
        data = compressed_x(x, size)
        try:
            group.from_compressed_bytes_unchecked(data)
        except ValueError:
            if not on_curve:
                return data
            continue
        if on_curve:
            return data
    raise AssertionError("no such x below 1000")


def replace(proof: bytes, partition: int, point: str, data: bytes) -> bytes:
    start = partition * 192 + OFFSETS[point]
    return proof[:start] + data + proof[start + len(data) :]


@pytest.fixture(scope="module")
def porep_proof() -> bytes:
    return b"".join(groth16_proof(i) for i in range(10))


def test_valid_multi_partition_proof_decodes_every_point(porep_proof: bytes) -> None:
    points = check_proof(porep_proof, KINDS["porep"])
    assert [p.partition for p in points] == list(range(10))
    assert points[4].a == G1Point() * Scalar(13)
    assert points[4].b == G2Point() * Scalar(22)
    assert points[4].c == G1Point() * Scalar(31)


@pytest.mark.parametrize(
    ("kind", "length"), [("porep", 1920), ("snap", 3072), ("wpost", 192), ("winning", 192)]
)
def test_expected_length_follows_the_kind(kind: str, length: int) -> None:
    proof = groth16_proof(1) * (length // 192)
    assert len(check_proof(proof, KINDS[kind])) == length // 192
    with pytest.raises(ProofStructureError, match=rf"{kind} proof is {length - 1} bytes, expected {length}"):
        check_proof(proof[:-1], KINDS[kind])


def test_partitions_argument_overrides_the_kind() -> None:
    proof = groth16_proof(2) * 2
    assert len(check_proof(proof, KINDS["porep"], partitions=2)) == 2
    with pytest.raises(ProofStructureError, match=r"is 384 bytes, expected 576 \(3 partitions x 192 bytes\)"):
        check_proof(proof, partitions=3)


@pytest.mark.parametrize("length", [0, 191, 193, 1919])
def test_without_kind_any_nonempty_multiple_of_192_is_required(length: int) -> None:
    proof = (groth16_proof(3) * 10)[:length]
    with pytest.raises(
        ProofStructureError, match=rf"proof is {length} bytes, expected a non-empty multiple of 192"
    ) as info:
        check_proof(proof)
    assert (info.value.partition, info.value.point) == (None, None)


def test_truncated_proof_is_a_length_error(porep_proof: bytes) -> None:
    with pytest.raises(ProofStructureError, match="porep proof is 1900 bytes, expected 1920"):
        check_proof(porep_proof[:1900], KINDS["porep"])


@pytest.mark.parametrize(("partition", "point"), [(0, "A"), (3, "B"), (9, "C")])
def test_flipped_x_bit_is_reported_with_partition_and_point(
    porep_proof: bytes, partition: int, point: str
) -> None:
    start = partition * 192 + OFFSETS[point] + 20
    corrupted = porep_proof[:start] + bytes([porep_proof[start] ^ 0x04]) + porep_proof[start + 1 :]
    with pytest.raises(ProofStructureError) as info:
        check_proof(corrupted, KINDS["porep"])
    assert (info.value.partition, info.value.point) == (partition, point)
    assert f"partition {partition} point {point}" in str(info.value)


def test_flipped_sign_bit_is_a_different_valid_point(porep_proof: bytes) -> None:
    """The y sign flag only negates the point: structure checks cannot catch it, pairing checks must."""
    corrupted = bytearray(porep_proof)
    corrupted[0] ^= 0x20
    assert check_proof(bytes(corrupted))[0].a == -G1Point()


@pytest.mark.parametrize(
    ("group", "size", "point"), [(G1Point, 48, "A"), (G2Point, 96, "B"), (G1Point, 48, "C")]
)
def test_x_off_the_curve_is_rejected(group: type, size: int, point: str) -> None:
    corrupted = replace(groth16_proof(4), 0, point, first_x(group, size, on_curve=False))
    with pytest.raises(ProofStructureError) as info:
        check_proof(corrupted)
    assert info.value.point == point
    assert info.value.reason.startswith(f"not a point on the {group.__name__[:2]} curve")


@pytest.mark.parametrize(("group", "size", "point"), [(G1Point, 48, "C"), (G2Point, 96, "B")])
def test_point_outside_the_subgroup_is_rejected(group: type, size: int, point: str) -> None:
    data = first_x(group, size, on_curve=True)
    assert not group.from_compressed_bytes_unchecked(data).is_in_subgroup()
    corrupted = replace(groth16_proof(5) * 2, 1, point, data)
    with pytest.raises(ProofStructureError) as info:
        check_proof(corrupted)
    assert (info.value.partition, info.value.point) == (1, point)
    assert info.value.reason == f"on the curve but not in the {group.__name__[:2]} prime-order subgroup"


@pytest.mark.parametrize("group", [G1Point, G2Point])
def test_checked_decoding_rejects_points_outside_the_subgroup(group: type) -> None:
    """Pins the library behaviour check_proof relies on instead of calling is_in_subgroup() itself."""
    data = first_x(group, 48 if group is G1Point else 96, on_curve=True)
    with pytest.raises(ValueError):
        group.from_compressed_bytes(data)


@pytest.mark.parametrize(("point", "size"), [("A", 48), ("B", 96), ("C", 48)])
def test_identity_is_rejected(point: str, size: int) -> None:
    identity = bytes([0xC0]) + bytes(size - 1)
    with pytest.raises(ProofStructureError, match=f"partition 0 point {point}: identity point") as info:
        check_proof(replace(groth16_proof(6), 0, point, identity))
    assert info.value.reason == "identity point (point at infinity)"


def test_uncompressed_flag_and_zeroed_buffers_are_rejected() -> None:
    with pytest.raises(ProofStructureError, match="partition 0 point A: not a compressed point"):
        check_proof(bytes(192))


def test_non_canonical_x_is_rejected() -> None:
    """Adding p to x names the same point on paper; a canonical decoder must refuse it."""
    x = int.from_bytes(first_x(G1Point, 48, on_curve=True), "big") & ((1 << 381) - 1)
    with pytest.raises(ProofStructureError, match="point A: not a point on the G1 curve"):
        check_proof(replace(groth16_proof(7), 0, "A", compressed_x(x + FP, 48)))
