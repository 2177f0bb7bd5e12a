"""SnapDeals (empty-sector update): per-partition encoding and inclusion checks.

The old replica (the sector key, tree root comm_r_last_old) is re-encoded with
new data (tree root comm_d_new): ``new = old + rho(node) * data`` with
``rho = H(phi, node)`` and ``phi = H(comm_d_new, comm_r_old)``; the new replica's
tree root is comm_r_last_new. ``comm_r_old = H(comm_c, comm_r_last_old)`` and
``comm_r_new = H(comm_c, comm_r_last_new)``. Each of the 16 partitions has
public inputs comm_r_old, comm_d_new, comm_r_new and its challenges
``H(comm_r_new, k, j) mod 2**depth``; per challenge the circuit checks the
encoding and the three inclusion proofs.

Vanilla proof blob, one per partition (little endian, field elements 32 bytes)::

    b"RSN1" | comm_c | comm_r_last_old | comm_r_last_new | u32 challenges |
    per challenge: old | data | 3 × (u32 depth | depth siblings)  (old, data, new paths)
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
)
from pytest_cuzk.refengine.field import fr_from_bytes
from pytest_cuzk.refengine.hashing import hash_n_gadget
from pytest_cuzk.refengine.r1cs import WitnessCS, enforce_equal, mul

__all__ = [
    "PARTITIONS",
    "Node",
    "SnapInputs",
    "blank",
    "challenges",
    "encode_partition",
    "parse",
    "synthesize",
]

PARTITIONS = 16
TAG = b"RSN1"
_FAIL = "SnapDeals parse failed: "
_SIZES = {0: 2048, 1: 8 << 20, 2: 512 << 20, 3: 32 << 30, 4: 64 << 30}


@dataclass(frozen=True)
class Node:
    """One challenged node: old replica value, new data, and the three paths."""

    old: int
    data: int
    old_path: tuple[int, ...]
    data_path: tuple[int, ...]
    new_path: tuple[int, ...]


@dataclass(frozen=True)
class SnapPartition:
    """One partition's vanilla proof."""

    comm_c: int
    comm_r_last_old: int
    comm_r_last_new: int
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class SnapWitness:
    """One partition circuit's inputs."""

    comm_r_old: int
    comm_d_new: int
    comm_r_new: int
    challenges: tuple[int, ...]
    part: SnapPartition


def challenges(comm_r_new: int, k: int, p: Preset) -> tuple[int, ...]:
    """The challenged nodes of partition k."""
    return tuple(derive_challenge([comm_r_new, k, j], p.tree_depth) for j in range(p.snap_challenges))


def synthesize(cs: WitnessCS, p: Preset, w: SnapWitness) -> None:
    """The partition circuit."""
    comm_r_old = cs.alloc_input(w.comm_r_old)
    comm_d_new = cs.alloc_input(w.comm_d_new)
    comm_r_new = cs.alloc_input(w.comm_r_new)
    comm_c = cs.alloc(w.part.comm_c)
    last_old, last_new = cs.alloc(w.part.comm_r_last_old), cs.alloc(w.part.comm_r_last_new)
    enforce_equal(cs, hash_n_gadget(cs, [comm_c, last_old]), comm_r_old)
    enforce_equal(cs, hash_n_gadget(cs, [comm_c, last_new]), comm_r_new)
    phi = hash_n_gadget(cs, [comm_d_new, comm_r_old])
    for ch, node in zip(w.challenges, w.part.nodes, strict=True):
        ch_num, bits = challenge_bits(cs, ch, p.tree_depth)
        old, data = cs.alloc(node.old), cs.alloc(node.data)
        rho = hash_n_gadget(cs, [phi, ch_num])
        new = old + mul(cs, rho, data)
        prove_inclusion(cs, old, bits, list(node.old_path), last_old)
        prove_inclusion(cs, data, bits, list(node.data_path), comm_d_new)
        prove_inclusion(cs, new, bits, list(node.new_path), last_new)
    cs.finish()


def blank(p: Preset) -> SnapWitness:
    """A zero witness of the circuit's shape."""
    path = (0,) * p.tree_depth
    node = Node(0, 0, path, path, path)
    n = p.snap_challenges
    return SnapWitness(0, 0, 0, (0,) * n, SnapPartition(0, 0, 0, (node,) * n))


def encode_partition(part: SnapPartition) -> bytes:
    """The vanilla proof blob of one partition."""
    w = BlobWriter(TAG).fr(part.comm_c).fr(part.comm_r_last_old).fr(part.comm_r_last_new).u32(len(part.nodes))
    for n in part.nodes:
        w.fr(n.old).fr(n.data).frs(list(n.old_path)).frs(list(n.data_path)).frs(list(n.new_path))
    return w.done()


def decode_partition(raw: bytes, p: Preset) -> SnapPartition:
    """Parse one blob; ValueError says what is wrong."""
    r = BlobReader(raw, TAG)
    comm_c, last_old, last_new = r.fr("comm_c"), r.fr("comm_r_last_old"), r.fr("comm_r_last_new")
    r.count("challenge count", p.snap_challenges)
    nodes = []
    for j in range(p.snap_challenges):
        old, data = r.fr(f"challenge {j} old"), r.fr(f"challenge {j} data")
        paths = [tuple(r.frs(f"challenge {j} {n} path", p.tree_depth)) for n in ("old", "data", "new")]
        nodes.append(Node(old, data, *paths))
    r.end()
    return SnapPartition(comm_c, last_old, last_new, tuple(nodes))


@dataclass(frozen=True)
class SnapInputs:
    """A parsed SnapDeals request."""

    preset: Preset
    comm_r_old: int
    comm_r_new: int
    comm_d_new: int
    parts: tuple[SnapPartition, ...]
    partitions: int = PARTITIONS

    def witness(self, k: int) -> SnapWitness:
        """Partition k's witness; cuzk's message when there are fewer vanilla proofs than partitions."""
        if k >= len(self.parts):
            raise JobInputError(f"partition {k} synthesis failed: partition {k} >= vanilla_proofs.len() "
                                f"{len(self.parts)}")  # fmt: skip
        chs = challenges(self.comm_r_new, k, self.preset)
        return SnapWitness(self.comm_r_old, self.comm_d_new, self.comm_r_new, chs, self.parts[k])

    def public_inputs(self, k: int) -> list[int]:
        """comm_r_old, comm_d_new, comm_r_new, then partition k's challenges."""
        return [
            self.comm_r_old,
            self.comm_d_new,
            self.comm_r_new,
            *challenges(self.comm_r_new, k, self.preset),
        ]


def parse(req: pb.SubmitProofRequest, p: Preset) -> SnapInputs:
    """Validate and decode a SnapDeals request with cuzk's messages."""
    if req.registered_proof not in _SIZES:
        raise JobInputError(_FAIL + "invalid registered proof for SnapDeals")
    size = _SIZES[req.registered_proof]
    if size != _SIZES[3]:
        raise JobInputError(
            _FAIL + f"pipelined synthesis currently supports only 32 GiB sectors, got {size} bytes"
        )
    comms = {}
    for name in ("comm_r_old", "comm_r_new", "comm_d_new"):
        try:
            comms[name] = fr_from_bytes(getattr(req, name), name)
        except ValueError as exc:
            raise JobInputError(_FAIL + str(exc)) from None
    parts = []
    for k, raw in enumerate(req.vanilla_proofs):
        try:
            parts.append(decode_partition(raw, p))
        except ValueError as exc:
            raise JobInputError(
                _FAIL + f"failed to deserialize SnapDeals partition proof: partition {k}: {exc}"
            ) from None
    return SnapInputs(p, comms["comm_r_old"], comms["comm_r_new"], comms["comm_d_new"], tuple(parts))
