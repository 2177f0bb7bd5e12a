"""Deterministic test data for all four proof kinds, plus the manifest that describes it.

``generate(out_dir, preset, seed)`` writes ``c1.json`` (PoRep C1 wrapper),
``snap-vanilla.json``, ``wpost-vanilla.json`` and ``winning-vanilla.json``
(JSON arrays of base64 blobs, cuzk-bench's ``--vanilla`` format) and
``manifest.toml`` with each file's sha256, size and request fields. Every
value comes from SHA-256 of (seed, label, index), so the same seed gives
byte-identical files on any machine and Python version.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import tomli_w

from ..proto import pb
from ..wire.kinds import KINDS
from ..wire.vanilla import write_vanilla_proofs
from .circuits import PRESETS, Preset, c1, porep, post, snap
from .circuits.common import MerkleTree, prover_id
from .field import R, fr_to_bytes
from .hashing import hash2

__all__ = ["MINER_ID", "SECTOR_NUMBER", "generate", "main"]

MINER_ID = 1000
SECTOR_NUMBER = 1
FILES = {"porep": "c1.json", "snap": "snap-vanilla.json", "wpost": "wpost-vanilla.json",
         "winning": "winning-vanilla.json"}  # fmt: skip


class _Stream:
    """Field elements and byte strings from SHA-256(seed, label, index)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def raw(self, label: str, i: int = 0) -> bytes:
        return hashlib.sha256(f"cuzk-ref gendata {self.seed} {label} {i}".encode()).digest()

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
    """A C1 wrapper for miner MINER_ID, sector SECTOR_NUMBER."""
    n = 1 << p.tree_depth
    data = s.frs("porep data", n)
    ticket, seed = s.raw("porep ticket"), s.raw("porep seed")
    d_tree = MerkleTree.build(data)
    rid = porep.replica_id(MINER_ID, SECTOR_NUMBER, ticket, d_tree.root)
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
    return c1.encode(commitments, parts, SECTOR_NUMBER)


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
    """One blob per sector of a full partition (sector ids 1..n)."""
    n_sectors, _ = post.slots(kind, p)
    rand = int.from_bytes(randomness, "little")
    blobs = []
    for sector_id in range(1, n_sectors + 1):
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


def generate(out_dir: Path, preset: str = "default", seed: int = 0) -> Path:
    """Write the four data files and ``manifest.toml`` into ``out_dir``; returns the manifest path."""
    if preset not in PRESETS:
        raise ValueError(f"unknown reference preset {preset!r}; use one of: {', '.join(PRESETS)}")
    p, s = PRESETS[preset], _Stream(seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / FILES["porep"]).write_bytes(porep_c1(p, s))
    snap_blobs, snap_fields = snap_data(p, s)
    write_vanilla_proofs(out_dir / FILES["snap"], snap_blobs)
    wrand, winrand = s.randomness("wpost randomness"), s.randomness("winning randomness")
    write_vanilla_proofs(out_dir / FILES["wpost"], post_data(pb.WINDOW_POST_PARTITION, p, s, wrand))
    write_vanilla_proofs(out_dir / FILES["winning"], post_data(pb.WINNING_POST, p, s, winrand))
    requests = {
        "porep": {"registered_proof": KINDS["porep"].registered_proof, "miner_id": MINER_ID,
                  "sector_number": SECTOR_NUMBER},
        "snap": {"registered_proof": KINDS["snap"].registered_proof, **snap_fields},
        "wpost": {"registered_proof": KINDS["wpost"].registered_proof, "miner_id": MINER_ID,
                  "randomness": wrand.hex(), "partition_index": 0},
        "winning": {"registered_proof": KINDS["winning"].registered_proof, "miner_id": MINER_ID,
                    "randomness": winrand.hex()},
    }  # fmt: skip
    manifest = {"engine": {"name": "cuzk-ref", "preset": preset, "seed": seed}, "kinds": {}}
    for kind, name in FILES.items():
        raw = (out_dir / name).read_bytes()
        manifest["kinds"][kind] = {"file": name, "sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw),
                                   "request": requests[kind]}  # fmt: skip
    path = out_dir / "manifest.toml"
    path.write_text(tomli_w.dumps(manifest))
    return path


def main(argv: list[str] | None = None) -> int:
    """``gen-data DIR [--preset P] [--seed N]``: write the data set and print the manifest's path."""
    ap = argparse.ArgumentParser(prog="cuzk-ref gen-data", description="Write reference-engine test data.")
    ap.add_argument("dir", type=Path, help="Output directory (created if missing)")
    ap.add_argument("--preset", default="default", choices=sorted(PRESETS), help="Circuit size preset")
    ap.add_argument("--seed", type=int, default=0, help="Data seed; the same seed gives identical files")
    args = ap.parse_args(argv)
    print(generate(args.dir, args.preset, args.seed))
    return 0
