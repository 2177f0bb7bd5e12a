""".params and .vk files for the reference circuits' Groth16 keys.

``.params`` holds the whole proving key with points uncompressed (x, y little
endian, no square roots on load: loading is fast, as with bellman's params);
``.vk`` holds only the verifying key, compressed and subgroup-checked on load,
because verifiers read it from wherever the plugin points them. Both start
with an 8-byte magic and a JSON metadata block describing the circuit, so a
verifier can derive public inputs for the right circuit shape.

Layout: magic | u32 meta_len | meta (UTF-8 JSON) | sections, each a u32 count
followed by that many points (or u32 indices for the density lists).
Files are written beside their final name and renamed, so readers never see half a key.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from py_arkworks_bls12381 import G1Point, G2Point

from pytest_cuzk.refengine.cursor import Cursor
from pytest_cuzk.refengine.groth16 import ProvingKey, VerifyingKey
from pytest_cuzk.vocab.files import atomic_write

__all__ = ["read_meta", "read_params", "read_vk", "write_params", "write_vk"]

PARAMS_MAGIC = b"CZREFPK\x01"
VK_MAGIC = b"CZREFVK\x01"


class _Reader(Cursor[bytes]):
    def __init__(self, raw: bytes, path: Path) -> None:
        super().__init__(raw)
        self.path = path

    def truncated(self, what: str, n: int) -> Exception:
        return ValueError(f"{self.path}: truncated key file (wanted {n} bytes at offset {self.pos})")

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def points(self, decode: Callable[[bytes], Any], size: int) -> list[Any]:
        return [decode(self.take(size)) for _ in range(self.u32())]


def _header(magic: bytes, meta: dict) -> bytes:
    blob = json.dumps(meta, sort_keys=True).encode()
    return magic + struct.pack("<I", len(blob)) + blob


def _section(items: list[Any], encode: Callable[[Any], bytes]) -> bytes:
    return struct.pack("<I", len(items)) + b"".join(encode(x) for x in items)


def _open(path: Path, magic: bytes) -> tuple[_Reader, dict]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"key file not found: {path}") from None
    r = _Reader(raw, path)
    if r.take(8) != magic:
        raise ValueError(f"{path}: not a reference-engine key file (bad magic); delete it to regenerate")
    return r, json.loads(r.take(r.u32()))


def read_meta(path: Path) -> dict:
    """Just the metadata block of a .params or .vk file."""
    with path.open("rb") as fh:
        head = fh.read(12)
        if head[:8] not in (PARAMS_MAGIC, VK_MAGIC) or len(head) < 12:
            raise ValueError(f"{path}: not a reference-engine key file (bad magic); delete it to regenerate")
        return json.loads(fh.read(struct.unpack("<I", head[8:])[0]))


def write_vk(path: Path, vk: VerifyingKey, meta: dict) -> None:
    """Write a verifying key (compressed points)."""
    c1, c2 = G1Point.to_compressed_bytes, G2Point.to_compressed_bytes
    body = (
        _section([vk.alpha_g1], c1)
        + _section([vk.beta_g2, vk.gamma_g2, vk.delta_g2], c2)
        + _section(vk.gamma_abc_g1, c1)
    )
    atomic_write(path, _header(VK_MAGIC, meta) + body)


def read_vk(path: Path) -> tuple[VerifyingKey, dict]:
    """Read and check a verifying key; raises ValueError naming the file when it is malformed."""
    r, meta = _open(path, VK_MAGIC)
    try:
        (alpha,) = r.points(G1Point.from_compressed_bytes, 48)
        beta, gamma, delta = r.points(G2Point.from_compressed_bytes, 96)
        ic = r.points(G1Point.from_compressed_bytes, 48)
    except Exception as exc:  # truncation, or the binding's own exception types for bad encodings
        raise ValueError(f"{path}: invalid verifying key ({exc}); delete it to regenerate") from exc
    return VerifyingKey(alpha, beta, gamma, delta, ic), meta


def write_params(path: Path, pk: ProvingKey) -> None:
    """Write a proving key (uncompressed points) with its metadata."""
    g1, g2 = G1Point.to_xy_bytes_le, G2Point.to_xy_bytes_le
    idx = lambda i: struct.pack("<I", i)  # noqa: E731
    vk = pk.vk
    body = b"".join(
        [
            _section([vk.alpha_g1, pk.beta_g1, pk.delta_g1], g1),
            _section([vk.beta_g2, vk.gamma_g2, vk.delta_g2], g2),
            _section(vk.gamma_abc_g1, g1),
            _section(pk.a_query, g1),
            _section(pk.b_g1_query, g1),
            _section(pk.b_g2_query, g2),
            _section(pk.h_query, g1),
            _section(pk.l_query, g1),
            _section(pk.a_density, idx),
            _section(pk.b_density, idx),
        ]
    )
    atomic_write(path, _header(PARAMS_MAGIC, pk.meta) + body)


def read_params(path: Path) -> ProvingKey:
    """Read a proving key written by ``write_params`` (trusted: points are not re-checked)."""
    r, meta = _open(path, PARAMS_MAGIC)
    g1, g2 = G1Point.from_xy_bytes_unchecked_le, G2Point.from_xy_bytes_unchecked_le
    idx = lambda b: struct.unpack("<I", b)[0]  # noqa: E731
    alpha, beta1, delta1 = r.points(g1, 96)
    beta2, gamma2, delta2 = r.points(g2, 192)
    vk = VerifyingKey(alpha, beta2, gamma2, delta2, r.points(g1, 96))
    return ProvingKey(
        vk=vk,
        beta_g1=beta1,
        delta_g1=delta1,
        a_query=r.points(g1, 96),
        b_g1_query=r.points(g1, 96),
        b_g2_query=r.points(g2, 192),
        h_query=r.points(g1, 96),
        l_query=r.points(g1, 96),
        a_density=r.points(idx, 4),
        b_density=r.points(idx, 4),
        meta=meta,
    )
