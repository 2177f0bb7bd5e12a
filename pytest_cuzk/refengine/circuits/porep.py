"""PoRep (SealCommit phase 2): per-partition challenges with label and inclusion checks.

A sector has data nodes (tree root comm_d) and SDR-style labels
``label_i = H(replica_id, i, label_p1, label_p2)`` over two earlier parents
(tree root comm_c); the replica is ``data + label`` per node (tree root
comm_r_last) and ``comm_r = H(comm_c, comm_r_last)``. ``replica_id =
H(prover_id, sector_number, ticket, comm_d)`` binds the miner, the sector
number, the ticket and the data. Each partition's public inputs are
replica_id, comm_d, comm_r and its challenges ``H(replica_id, seed, n) mod
2**depth``; per challenge the circuit recomputes the label from its parents'
labels (private, as is their position: a simplification of SDR), and proves
the label under comm_c, the data under comm_d and the replica node under
comm_r_last.

The prover takes replica_id from the C1 data; the self-check derives it from
the request's miner_id and sector_number, so a request naming the wrong
miner or sector fails the self-check, as with cuzk.

C1 inner JSON (the ``Phase1Out`` payload): ``registered_proof``, ``comm_r``,
``comm_d``, ``replica_id``, ``seed``, ``ticket`` (each an array of 32 byte
values, as filecoin-proofs writes them) and ``vanilla_proofs``, keyed by the
proof's shape as filecoin-proofs-api writes it: ``{"StackedDrg32GiBV1": [[...],
...]}``, per partition one object per challenge ``{"comm_c", "comm_r_last",
"data", "label", "parents", "data_path", "label_path", "replica_path"}`` with
field elements as 64-digit little-endian hex.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pytest_cuzk.refengine.circuits import Preset
from pytest_cuzk.refengine.circuits.common import (
    bytes_to_fr_masked,
    challenge_bits,
    derive_challenge,
    prove_inclusion,
    prover_id,
)
from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.hashing import hash_n, hash_n_gadget
from pytest_cuzk.refengine.r1cs import WitnessCS, enforce_equal

__all__ = ["PARENTS", "Challenge", "PorepWitness", "blank", "challenges", "replica_id", "synthesize"]

PARENTS = 2


@dataclass(frozen=True)
class Challenge:
    """One challenged node's vanilla data."""

    data: int
    label: int
    parents: tuple[int, ...]
    data_path: tuple[int, ...]
    label_path: tuple[int, ...]
    replica_path: tuple[int, ...]


@dataclass(frozen=True)
class PorepWitness:
    """One partition circuit's inputs."""

    replica_id: int
    comm_d: int
    comm_r: int
    comm_c: int
    comm_r_last: int
    challenges: tuple[int, ...]
    nodes: tuple[Challenge, ...]


def replica_id(miner_id: int, sector_number: int, ticket: bytes, comm_d: int) -> int:
    """H(prover_id, sector_number, ticket, comm_d)."""
    return hash_n([prover_id(miner_id), sector_number % R, bytes_to_fr_masked(ticket), comm_d])


def challenges(rid: int, seed: bytes, partition: int, p: Preset) -> tuple[int, ...]:
    """The challenged nodes of one partition."""
    seed_fr = bytes_to_fr_masked(seed)
    n = p.porep_challenges
    return tuple(derive_challenge([rid, seed_fr, partition * n + j], p.tree_depth) for j in range(n))


def parents(node: int) -> tuple[int, ...]:
    """A node's parent nodes, all earlier ones (node 0 has none: its parent labels are 0)."""
    if node == 0:
        return ()
    return tuple(
        int.from_bytes(hashlib.sha256(b"cuzk-ref drg %d %d" % (node, k)).digest(), "little") % node
        for k in range(PARENTS)
    )


def label(rid: int, node: int, parent_labels: list[int]) -> int:
    """SDR-style labelling of one node."""
    return hash_n([rid, node, *parent_labels])


def synthesize(cs: WitnessCS, p: Preset, w: PorepWitness) -> None:
    """The partition circuit."""
    rid, comm_d, comm_r = cs.alloc_input(w.replica_id), cs.alloc_input(w.comm_d), cs.alloc_input(w.comm_r)
    comm_c, comm_r_last = cs.alloc(w.comm_c), cs.alloc(w.comm_r_last)
    enforce_equal(cs, hash_n_gadget(cs, [comm_c, comm_r_last]), comm_r)
    for ch, node in zip(w.challenges, w.nodes, strict=True):
        ch_num, bits = challenge_bits(cs, ch, p.tree_depth)
        lbl = cs.alloc(node.label)
        expected = hash_n_gadget(cs, [rid, ch_num, *(cs.alloc(x) for x in node.parents)])
        enforce_equal(cs, expected, lbl)
        data = cs.alloc(node.data)
        prove_inclusion(cs, lbl, bits, list(node.label_path), comm_c)
        prove_inclusion(cs, data, bits, list(node.data_path), comm_d)
        prove_inclusion(cs, data + lbl, bits, list(node.replica_path), comm_r_last)
    cs.finish()


def blank(p: Preset) -> PorepWitness:
    """A zero witness of the circuit's shape."""
    path = (0,) * p.tree_depth
    node = Challenge(0, 0, (0,) * PARENTS, path, path, path)
    n = p.porep_challenges
    return PorepWitness(0, 0, 0, 0, 0, (0,) * n, (node,) * n)
