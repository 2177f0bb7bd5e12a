"""WindowPoSt and WinningPoSt: Merkle inclusion of challenged leaves under each sector's comm_r.

Per sector slot the circuit takes comm_r as a public input, checks
comm_r = H(comm_c, comm_r_last), and for each challenge (a public input,
derived from randomness, prover id, sector id, and for WindowPoSt the
partition index) proves the challenged leaf's path to comm_r_last.
WindowPoSt has ``wpost_sectors`` slots (a short partition is padded with its
last sector, as Filecoin pads); WinningPoSt proves one sector, the first blob.

Vanilla proof blob, one per sector (little endian)::

    b"RPS1" | u64 sector_id | comm_r | comm_c | comm_r_last | u32 challenges |
    per challenge: leaf | u32 depth | depth siblings

where every field element is 32 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.circuits import JobInputError, Preset
from pytest_cuzk.refengine.circuits.common import (
    BlobReader,
    BlobWriter,
    challenge_bits,
    derive_challenge,
    prove_inclusion,
    prover_id,
)
from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.hashing import hash_n_gadget
from pytest_cuzk.refengine.r1cs import WitnessCS, enforce_equal

__all__ = ["PostInputs", "SectorProof", "blank", "encode_sector", "parse", "synthesize"]

TAG = b"RPS1"
_NAMES: dict[int, str] = {pb.WINDOW_POST_PARTITION: "WindowPoSt", pb.WINNING_POST: "WinningPoSt"}
_ACCEPTED: dict[int, tuple[int, ...]] = {pb.WINDOW_POST_PARTITION: (8, 13), pb.WINNING_POST: (3,)}


@dataclass(frozen=True)
class SectorProof:
    """One sector's vanilla proof: its commitments and a leaf + path per challenge."""

    sector_id: int
    comm_r: int
    comm_c: int
    comm_r_last: int
    leaves: tuple[int, ...]
    paths: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class PostWitness:
    """One partition circuit's inputs: per slot a sector proof and its challenges."""

    sectors: tuple[SectorProof, ...]
    challenges: tuple[tuple[int, ...], ...]


def slots(kind: int, p: Preset) -> tuple[int, int]:
    """(sector slots, challenges per sector) of the kind's circuit."""
    if kind == pb.WINNING_POST:
        return 1, p.winning_challenges
    return p.wpost_sectors, p.wpost_challenges


def sector_challenges(
    kind: int, p: Preset, randomness: int, prover: int, sector_id: int, partition: int
) -> tuple[int, ...]:
    """The challenged leaf indices of one sector."""
    _, n = slots(kind, p)
    extra = [partition] if kind == pb.WINDOW_POST_PARTITION else []
    return tuple(derive_challenge([randomness, prover, sector_id, *extra, j], p.tree_depth) for j in range(n))


def synthesize(cs: WitnessCS, p: Preset, w: PostWitness) -> None:
    """The circuit: per slot a comm_r check and one inclusion proof per challenge."""
    for sector, challenges in zip(w.sectors, w.challenges, strict=True):
        comm_r = cs.alloc_input(sector.comm_r)
        comm_c, comm_r_last = cs.alloc(sector.comm_c), cs.alloc(sector.comm_r_last)
        enforce_equal(cs, hash_n_gadget(cs, [comm_c, comm_r_last]), comm_r)
        for ch, leaf, path in zip(challenges, sector.leaves, sector.paths, strict=True):
            _, bits = challenge_bits(cs, ch, p.tree_depth)
            prove_inclusion(cs, cs.alloc(leaf), bits, list(path), comm_r_last)
    cs.finish()


def blank(kind: int, p: Preset) -> PostWitness:
    """A zero witness of the circuit's shape."""
    n_sectors, n_ch = slots(kind, p)
    sector = SectorProof(0, 0, 0, 0, (0,) * n_ch, ((0,) * p.tree_depth,) * n_ch)
    return PostWitness((sector,) * n_sectors, ((0,) * n_ch,) * n_sectors)


def encode_sector(s: SectorProof) -> bytes:
    """The vanilla proof blob of one sector."""
    w = BlobWriter(TAG).u64(s.sector_id).fr(s.comm_r).fr(s.comm_c).fr(s.comm_r_last).u32(len(s.leaves))
    for leaf, path in zip(s.leaves, s.paths, strict=True):
        w.fr(leaf).frs(list(path))
    return w.done()


def decode_sector(raw: bytes, kind: int, p: Preset) -> SectorProof:
    """Parse one blob; ValueError says what is wrong."""
    r = BlobReader(raw, TAG)
    sector_id = r.u64("sector_id")
    comm_r, comm_c, comm_r_last = r.fr("comm_r"), r.fr("comm_c"), r.fr("comm_r_last")
    _, n = slots(kind, p)
    r.count("challenge count", n)
    leaves, paths = [], []
    for j in range(n):
        leaves.append(r.fr(f"challenge {j} leaf"))
        paths.append(tuple(r.frs(f"challenge {j} path", p.tree_depth)))
    r.end()
    return SectorProof(sector_id, comm_r, comm_c, comm_r_last, tuple(leaves), tuple(paths))


@dataclass(frozen=True)
class PostInputs:
    """A parsed PoSt request."""

    kind: int
    preset: Preset
    sectors: tuple[SectorProof, ...]
    randomness: int
    prover: int
    partition_index: int
    partitions: int = 1

    def witness(self, k: int) -> PostWitness:
        """The single partition's witness."""
        chs = tuple(
            sector_challenges(self.kind, self.preset, self.randomness, self.prover, s.sector_id,
                              self.partition_index)
            for s in self.sectors
        )  # fmt: skip
        return PostWitness(self.sectors, chs)

    def public_inputs(self, k: int) -> list[int]:
        """Per slot: comm_r then the challenges."""
        w = self.witness(k)
        return [x for s, chs in zip(w.sectors, w.challenges, strict=True) for x in (s.comm_r, *chs)]


def check_registered_proof(kind: int, value: int) -> None:
    """Apply cuzk's registered_proof checks for PoSt (only the 32 GiB values have reference circuits)."""
    if value > 14:
        raise JobInputError(f"synthesis failed: unknown RegisteredPoStProof value: {value}")
    if value not in _ACCEPTED[kind]:
        raise JobInputError(f"synthesis failed: invalid registered proof for {_NAMES[kind]}")


def parse(req: pb.SubmitProofRequest, p: Preset) -> PostInputs:
    """Validate and decode a PoSt request the way cuzk does, with cuzk's messages."""
    kind = req.proof_kind
    check_registered_proof(kind, req.registered_proof)
    if len(req.randomness) != 32:
        raise JobInputError(
            f"synthesis failed: randomness must be exactly 32 bytes, got {len(req.randomness)}"
        )
    randomness = int.from_bytes(req.randomness, "little")
    if randomness >= R:
        raise JobInputError("synthesis failed: randomness is not a valid BLS12-381 scalar field element")
    if not req.vanilla_proofs:
        raise JobInputError("synthesis panicked: index out of bounds: the len is 0 but the index is 0")
    blobs = list(req.vanilla_proofs[:1] if kind == pb.WINNING_POST else req.vanilla_proofs)
    n_slots, _ = slots(kind, p)
    if len(blobs) > n_slots:
        raise JobInputError(
            f"synthesis failed: {len(blobs)} sectors do not fit one {_NAMES[kind]} partition "
            f"of the '{p.name}' preset (at most {n_slots})"
        )
    sectors = []
    for i, raw in enumerate(blobs):
        try:
            sectors.append(decode_sector(raw, kind, p))
        except ValueError as exc:
            raise JobInputError(
                f"synthesis failed: failed to deserialize {_NAMES[kind]} vanilla proof: sector {i}: {exc}"
            ) from None
    sectors += [sectors[-1]] * (n_slots - len(sectors))
    return PostInputs(kind, p, tuple(sectors), randomness, prover_id(req.miner_id), req.partition_index)
