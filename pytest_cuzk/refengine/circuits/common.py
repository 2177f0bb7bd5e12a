"""Pieces every reference circuit uses: Merkle trees, challenge derivation, blob encoding.

Trees are binary with ``hash2`` nodes; a path is the list of siblings from the
leaf up, and the leaf index's bits (least significant first) say on which side
each sibling sits. Challenges are derived natively (as Filecoin derives them
outside its circuits) and enter the circuit as public inputs, where they are
decomposed into the bits that steer the path.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pytest_cuzk.refengine.cursor import Cursor
from pytest_cuzk.refengine.field import R, fr_to_bytes
from pytest_cuzk.refengine.hashing import hash2, hash_n, hash_n_gadget
from pytest_cuzk.refengine.r1cs import Num, WitnessCS, alloc_bits, enforce_equal, swap_if

__all__ = [
    "BlobReader",
    "BlobWriter",
    "MerkleTree",
    "bytes_to_fr_masked",
    "challenge_bits",
    "derive_challenge",
    "prove_inclusion",
    "prover_id",
]


@dataclass(frozen=True)
class MerkleTree:
    """A complete binary tree over ``2**depth`` field-element leaves."""

    levels: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, leaves: list[int]) -> MerkleTree:
        """Hash the leaves up to the root."""
        levels = [tuple(leaves)]
        while len(levels[-1]) > 1:
            lv = levels[-1]
            levels.append(tuple(hash2(lv[i], lv[i + 1]) for i in range(0, len(lv), 2)))
        return cls(tuple(levels))

    @property
    def root(self) -> int:
        """The root hash."""
        return self.levels[-1][0]

    def path(self, index: int) -> list[int]:
        """Siblings from the leaf at ``index`` up to (not including) the root."""
        return [level[(index >> i) ^ 1] for i, level in enumerate(self.levels[:-1])]


def prove_inclusion(cs: WitnessCS, leaf: Num, bits: list[Num], path: list[int], root: Num) -> None:
    """Require that ``leaf`` sits at the position ``bits`` under ``root`` (siblings are private)."""
    cur = leaf
    for bit, sibling in zip(bits, path, strict=True):
        left, right = swap_if(cs, bit, cur, cs.alloc(sibling))
        cur = hash_n_gadget(cs, [left, right])
    enforce_equal(cs, cur, root)


def challenge_bits(cs: WitnessCS, challenge: int, depth: int) -> tuple[Num, list[Num]]:
    """Allocate a challenge as a public input and decompose it into ``depth`` path bits."""
    ch = cs.alloc_input(challenge)
    return ch, alloc_bits(cs, ch, depth)


def derive_challenge(seed: list[int], depth: int) -> int:
    """A leaf index in [0, 2**depth) from public values (randomness, ids, counters)."""
    return hash_n(seed) % (1 << depth)


def prover_id(miner_id: int) -> int:
    """The prover id as a field element: the actor id LEB128-encoded into 32 bytes, as cuzk does."""
    out = bytearray()
    v = miner_id
    while True:
        byte, v = v & 0x7F, v >> 7
        out.append(byte | (0x80 if v else 0))
        if not v:
            break
    return int.from_bytes(bytes(out).ljust(32, b"\0"), "little")


def bytes_to_fr_masked(raw: bytes) -> int:
    """32 arbitrary bytes (a ticket, a seed) as a field element: top two bits cleared, as Curio does."""
    return int.from_bytes(raw, "little") & ((1 << 254) - 1)


class BlobWriter:
    """Builds the compact binary vanilla-proof blobs (little endian)."""

    def __init__(self, tag: bytes) -> None:
        self.parts = [tag]

    def u64(self, v: int) -> BlobWriter:
        """Append a u64."""
        self.parts.append(struct.pack("<Q", v))
        return self

    def fr(self, v: int) -> BlobWriter:
        """Append a 32-byte field element."""
        self.parts.append(fr_to_bytes(v))
        return self

    def frs(self, vs: list[int]) -> BlobWriter:
        """Append a u32 count and that many field elements."""
        self.parts.append(struct.pack("<I", len(vs)))
        for v in vs:
            self.fr(v)
        return self

    def u32(self, v: int) -> BlobWriter:
        """Append a u32."""
        self.parts.append(struct.pack("<I", v))
        return self

    def done(self) -> bytes:
        """The blob."""
        return b"".join(self.parts)


class BlobReader(Cursor[bytes]):
    """Reads a blob; every problem is a ValueError saying where in the blob it is."""

    def __init__(self, raw: bytes, tag: bytes) -> None:
        super().__init__(raw)
        got = self.take(len(tag), "tag")
        if got != tag:
            raise ValueError(f"bad tag {got!r}, expected {tag!r} (not this kind's vanilla proof)")

    def truncated(self, what: str, n: int) -> Exception:
        return ValueError(f"unexpected end of input reading {what} at byte {self.pos} of {len(self.raw)}")

    def u32(self, what: str) -> int:
        """Read a u32."""
        return struct.unpack("<I", self.take(4, what))[0]

    def u64(self, what: str) -> int:
        """Read a u64."""
        return struct.unpack("<Q", self.take(8, what))[0]

    def fr(self, what: str) -> int:
        """Read a field element, rejecting non-canonical encodings."""
        v = int.from_bytes(self.take(32, what), "little")
        if v >= R:
            raise ValueError(f"{what} at byte {self.pos - 32} is not a valid field element")
        return v

    def frs(self, what: str, expected: int) -> list[int]:
        """Read a counted list of field elements whose count must be ``expected``."""
        n = self.u32(f"{what} count")
        if n != expected:
            raise ValueError(f"{what}: expected {expected} elements, got {n} (data for another preset?)")
        return [self.fr(what) for _ in range(n)]

    def count(self, what: str, expected: int) -> None:
        """Read a u32 count that must equal ``expected``."""
        n = self.u32(what)
        if n != expected:
            raise ValueError(f"{what}: expected {expected}, got {n} (data for another preset?)")

    def end(self) -> None:
        """Require that the whole blob was consumed."""
        if self.pos != len(self.raw):
            raise ValueError(f"{len(self.raw) - self.pos} trailing bytes")
