"""Deterministic test data for all four proof kinds, plus the manifest that describes it.

``generate(out_dir, preset, seed, sectors)`` writes, for each of ``sectors``
sectors (default 2), ``c1.json`` (PoRep C1 wrapper), ``snap-vanilla.json``,
``wpost-vanilla.json`` and ``winning-vanilla.json`` (JSON arrays of base64 blobs,
cuzk-bench's ``--vanilla`` format; sector N > 1 adds ``-N`` to the name), and
``manifest.toml`` with one ``[[kinds.<kind>]]`` table per sector: its file,
sha256, size and request fields. Sectors differ in every value (PoRep sector
numbers 1, 2, ...; PoSt sector ids and randomness), so a batch case whose proofs
went to the wrong requests fails verification. Every value comes from SHA-256 of
(seed, label, sector, index): the same seed gives byte-identical files anywhere.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import tomli_w

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.circuits import PRESETS, Preset, c1, porep, post, snap
from pytest_cuzk.refengine.circuits.common import MerkleTree, prover_id
from pytest_cuzk.refengine.field import R, fr_to_bytes
from pytest_cuzk.refengine.hashing import hash2
from pytest_cuzk.vocab.files import atomic_write
from pytest_cuzk.vocab.kinds import KINDS
from pytest_cuzk.vocab.vanilla import write_vanilla_proofs

__all__ = ["MINER_ID", "file_name", "generate"]

MINER_ID = 1000
FILES = {"porep": "c1.json", "snap": "snap-vanilla.json", "wpost": "wpost-vanilla.json",
         "winning": "winning-vanilla.json"}  # fmt: skip


def file_name(kind: str, sector: int) -> str:
    """Sector 1 keeps cuzk-bench's name (``c1.json``); sector N adds ``-N`` (``c1-2.json``)."""
    name = FILES[kind]
    if sector == 1:
        return name
    stem, _, ext = name.rpartition(".")
    return f"{stem}-{sector}.{ext}"


class _Stream:
    """Field elements and byte strings from SHA-256(seed, label, index)."""

    def __init__(self, seed: int, sector: int = 1) -> None:
        self.seed = seed
        self.sector = sector

    def raw(self, label: str, i: int = 0) -> bytes:
        tag = "" if self.sector == 1 else f" sector {self.sector}"
        return hashlib.sha256(f"cuzk-ref gendata {self.seed}{tag} {label} {i}".encode()).digest()

    def fr(self, label: str, i: int = 0) -> int:
        return int.from_bytes(self.raw(label, i), "little") % R

    def frs(self, label: str, n: int) -> list[int]:
        return [self.fr(label, i) for i in range(n)]

    def randomness(self, label: str) -> bytes:
        """32 bytes that are a valid Fr: the top two bits cleared, as Curio does."""
        b = bytearray(self.raw(label))
        b[31] &= 0x3F
        return bytes(b)


def porep_c1(p: Preset, s: _Stream) -> bytes:
    """A C1 wrapper for miner MINER_ID, sector number ``s.sector``."""
    n = 1 << p.tree_depth
    data = s.frs("porep data", n)
    ticket, seed = s.raw("porep ticket"), s.raw("porep seed")
    d_tree = MerkleTree.build(data)
    rid = porep.replica_id(MINER_ID, s.sector, ticket, d_tree.root)
    labels: list[int] = []
    for i in range(n):
        parent_labels = [labels[q] for q in porep.parents(i)] or [0] * porep.PARENTS
        labels.append(porep.label(rid, i, parent_labels))
    c_tree = MerkleTree.build(labels)
    r_tree = MerkleTree.build([(d + lb) % R for d, lb in zip(data, labels, strict=True)])
    comm_r = hash2(c_tree.root, r_tree.root)
    parts = []
    for k in range(c1.PARTITIONS):
        nodes = tuple(
            porep.Challenge(
                data[i], labels[i],
                tuple(labels[q] for q in porep.parents(i)) or (0,) * porep.PARENTS,
                tuple(d_tree.path(i)), tuple(c_tree.path(i)), tuple(r_tree.path(i)),
            )
            for i in porep.challenges(rid, seed, k, p)
        )  # fmt: skip
        parts.append(c1.Partition(c_tree.root, r_tree.root, nodes))
    commitments = {"comm_r": fr_to_bytes(comm_r), "comm_d": fr_to_bytes(d_tree.root),
                   "replica_id": fr_to_bytes(rid), "seed": seed, "ticket": ticket}  # fmt: skip
    return c1.encode(commitments, parts, s.sector)


def snap_data(p: Preset, s: _Stream) -> tuple[list[bytes], dict[str, str]]:
    """16 partition blobs and the request's commitments."""
    n = 1 << p.tree_depth
    old, data, comm_c = s.frs("snap old", n), s.frs("snap data", n), s.fr("snap comm_c")
    old_tree, d_tree = MerkleTree.build(old), MerkleTree.build(data)
    comm_r_old = hash2(comm_c, old_tree.root)
    phi = hash2(d_tree.root, comm_r_old)
    new_tree = MerkleTree.build(
        [(o + hash2(phi, i) * d) % R for i, (o, d) in enumerate(zip(old, data, strict=True))]
    )
    comm_r_new = hash2(comm_c, new_tree.root)
    blobs = []
    for k in range(snap.PARTITIONS):
        nodes = tuple(
            snap.Node(
                old[i], data[i], tuple(old_tree.path(i)), tuple(d_tree.path(i)), tuple(new_tree.path(i))
            )
            for i in snap.challenges(comm_r_new, k, p)
        )
        blobs.append(snap.encode_partition(snap.SnapPartition(comm_c, old_tree.root, new_tree.root, nodes)))
    fields = {"comm_r_old": comm_r_old, "comm_r_new": comm_r_new, "comm_d_new": d_tree.root}
    return blobs, {k: fr_to_bytes(v).hex() for k, v in fields.items()}


def post_data(kind: int, p: Preset, s: _Stream, randomness: bytes) -> list[bytes]:
    """One blob per sector of a full partition (data set N: sector ids (N-1)*n+1 .. N*n)."""
    n_sectors, _ = post.slots(kind, p)
    rand = int.from_bytes(randomness, "little")
    blobs = []
    first = (s.sector - 1) * n_sectors + 1
    for sector_id in range(first, first + n_sectors):
        label = f"post {kind} sector {sector_id}"
        tree = MerkleTree.build(s.frs(label, 1 << p.tree_depth))
        comm_c = s.fr(label + " comm_c")
        chs = post.sector_challenges(kind, p, rand, prover_id(MINER_ID), sector_id, 0)
        proof = post.SectorProof(
            sector_id, hash2(comm_c, tree.root), comm_c, tree.root,
            tuple(tree.levels[0][i] for i in chs), tuple(tuple(tree.path(i)) for i in chs),
        )  # fmt: skip
        blobs.append(post.encode_sector(proof))
    return blobs


def _sector(out_dir: Path, p: Preset, seed: int, sector: int) -> dict[str, dict[str, Any]]:
    """Write one sector's four files; returns each kind's request fields."""
    s = _Stream(seed, sector)
    atomic_write(out_dir / file_name("porep", sector), porep_c1(p, s))
    snap_blobs, snap_fields = snap_data(p, s)
    write_vanilla_proofs(out_dir / file_name("snap", sector), snap_blobs)
    wrand, winrand = s.randomness("wpost randomness"), s.randomness("winning randomness")
    write_vanilla_proofs(
        out_dir / file_name("wpost", sector), post_data(pb.WINDOW_POST_PARTITION, p, s, wrand)
    )
    write_vanilla_proofs(out_dir / file_name("winning", sector), post_data(pb.WINNING_POST, p, s, winrand))
    return {
        "porep": {"registered_proof": KINDS["porep"].registered_proof, "miner_id": MINER_ID,
                  "sector_number": sector},
        "snap": {"registered_proof": KINDS["snap"].registered_proof, **snap_fields},
        "wpost": {"registered_proof": KINDS["wpost"].registered_proof, "miner_id": MINER_ID,
                  "randomness": wrand.hex(), "partition_index": 0},
        "winning": {"registered_proof": KINDS["winning"].registered_proof, "miner_id": MINER_ID,
                    "randomness": winrand.hex()},
    }  # fmt: skip


def generate(out_dir: Path, preset: str = "default", seed: int = 0, sectors: int = 2) -> Path:
    """Write every sector's four data files and ``manifest.toml`` into ``out_dir``; returns the manifest."""
    if preset not in PRESETS:
        raise ValueError(f"unknown reference preset {preset!r}; use one of: {', '.join(PRESETS)}")
    if sectors < 1:
        raise ValueError(f"sectors must be at least 1, got {sectors}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kinds: dict[str, list[dict[str, Any]]] = {kind: [] for kind in FILES}
    for sector in range(1, sectors + 1):
        for kind, request in _sector(out_dir, PRESETS[preset], seed, sector).items():
            name = file_name(kind, sector)
            raw = (out_dir / name).read_bytes()
            entry = {
                "file": name,
                "sha256": hashlib.sha256(raw).hexdigest(),
                "size": len(raw),
                "request": request,
            }
            kinds[kind].append(entry)
    manifest = {"engine": {"name": "cuzk-ref", "preset": preset, "seed": seed}, "kinds": kinds}
    path = out_dir / "manifest.toml"
    atomic_write(path, tomli_w.dumps(manifest))  # last, and whole: it says the data is complete
    return path
