r"""Pre-compiled constraint evaluator (PCE) files: a circuit's R1CS as CSR, on disk.

With a PCE, synthesis is witness generation (``WitnessCS``: no linear
combinations, no constraint bookkeeping) plus three sparse mat-vecs for A·z,
B·z, C·z — the path cuzk's PCE was built for. The file is
``<param_cache>/pce-<name>.bin``, written beside its final name and renamed.

Layout (little endian), header as cuzk's version-2 files, 32 bytes::

    magic b"PCE\\x02" | u32 version=2 | u32 num_inputs | u32 num_aux |
    u32 num_constraints | u64 total_nnz | u32 reserved=0

then for each of A, B, C: row_ptrs (u64 count + u32 each), cols (u64 count +
u32 each), vals (u64 count + 32-byte scalars). Unlike cuzk, scalars are
canonical little-endian (not Montgomery form) and there are no density
bitmaps: the reference prover keeps densities in its proving key. Last comes
the circuit's constraint digest (u64 count = 32, then SHA-256 of everything
before it), which ties the file to its circuit: the trusted setup records the
digest in the key's metadata, and a file whose matrices do not hash to it (a
changed coefficient, another circuit's file) is rejected and extracted again.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from array import array
from collections.abc import Iterable
from pathlib import Path

from filelock import FileLock

from pytest_cuzk.refengine.cursor import Cursor
from pytest_cuzk.refengine.errors import RefEngineError
from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.r1cs import CSR, Matrices
from pytest_cuzk.vocab.files import atomic_write

__all__ = [
    "HEADER",
    "MAGIC",
    "VERSION",
    "PceError",
    "constraint_digest",
    "encode",
    "load_pce",
    "pce_path",
    "write_pce",
]

MAGIC = b"PCE\x02"
VERSION = 2
HEADER = struct.Struct("<4sIIIIQI")
assert HEADER.size == 32
DIGEST_LEN = 32


class PceError(RefEngineError, ValueError):
    """A PCE file that cannot be used; the message names the file and what is wrong."""


def pce_path(param_cache: Path, name: str) -> Path:
    """``<param_cache>/pce-<name>.bin``."""
    return param_cache / f"pce-{name}.bin"


def _u32s(values: Iterable[int]) -> bytes:
    arr = array("I", values)
    if sys.byteorder != "little":
        arr.byteswap()
    return struct.pack("<Q", len(arr)) + arr.tobytes()


def _body(m: Matrices) -> bytes:
    out = [HEADER.pack(MAGIC, VERSION, m.num_inputs, m.num_aux, m.num_constraints, m.nnz, 0)]
    for mat in (m.a, m.b, m.c):
        out += [_u32s(mat.row_ptr), _u32s(mat.cols), struct.pack("<Q", len(mat.vals))]
        out += [v.to_bytes(32, "little") for v in mat.vals]
    return b"".join(out)


def constraint_digest(m: Matrices) -> str:
    """Hex SHA-256 of a constraint system's sizes and matrices: what a PCE file of it must carry."""
    return hashlib.sha256(_body(m)).hexdigest()


def encode(m: Matrices) -> bytes:
    """The whole file's bytes, its constraint digest last."""
    body = _body(m)
    return body + struct.pack("<Q", DIGEST_LEN) + hashlib.sha256(body).digest()


def write_pce(param_cache: Path, name: str, m: Matrices) -> Path:
    """Write ``pce-<name>.bin`` atomically (a temporary file, then rename); returns the path."""
    final = pce_path(param_cache, name)
    with FileLock(f"{final}.lock"):  # daemons sharing a param cache write it once at a time
        atomic_write(final, encode(m))
    return final


class _Reader(Cursor[memoryview]):
    def __init__(self, raw: bytes, path: Path) -> None:
        super().__init__(memoryview(raw))
        self.path = path

    def truncated(self, what: str, n: int) -> Exception:
        return PceError(f"{self.path}: truncated PCE file while reading {what}; delete it to re-extract")

    def u32s(self, what: str) -> array:
        (count,) = struct.unpack("<Q", self.take(8, what))
        arr = array("I")
        arr.frombytes(self.take(4 * count, what))
        if sys.byteorder != "little":
            arr.byteswap()
        return arr

    def scalars(self, what: str) -> list[int]:
        (count,) = struct.unpack("<Q", self.take(8, what))
        blob = self.take(32 * count, what).tobytes()
        vals = [int.from_bytes(blob[i : i + 32], "little") for i in range(0, len(blob), 32)]
        if any(v >= R for v in vals):
            raise PceError(f"{self.path}: {what} holds a value that is not a field element")
        return vals


def load_pce(path: Path, expected_digest: str | None = None) -> Matrices:
    """Read and validate a PCE file; PceError says what is wrong with it.

    ``expected_digest`` is the circuit's constraint digest (from its key): a file of
    another circuit is rejected even when it is intact.
    """
    raw = path.read_bytes()
    if len(raw) < HEADER.size:
        raise PceError(f"{path}: truncated PCE file ({len(raw)} bytes, header needs {HEADER.size})")
    magic, version, ni, na, nc, nnz, _ = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise PceError(f"{path}: not a PCE file (magic {bytes(magic)!r}, expected {MAGIC!r})")
    if version != VERSION:
        raise PceError(f"{path}: PCE format version {version} is not supported (expected {VERSION})")
    r = _Reader(raw, path)
    r.pos = HEADER.size
    mats = []
    for name in "ABC":
        rp, cols, vals = r.u32s(f"{name} row_ptrs"), r.u32s(f"{name} cols"), r.scalars(f"{name} vals")
        if len(rp) != nc + 1 or len(cols) != len(vals) or (rp and rp[-1] != len(cols)):
            raise PceError(f"{path}: matrix {name} does not match the header's {nc} constraints")
        if cols and max(cols) >= ni + na:
            raise PceError(f"{path}: matrix {name} names a variable beyond the header's {ni + na}")
        mats.append(CSR(rp, cols, vals))
    body_end = r.pos
    (count,) = struct.unpack("<Q", r.take(8, "constraint digest"))
    stored = r.take(count, "constraint digest").tobytes().hex()
    if r.pos != len(raw):
        raise PceError(f"{path}: {len(raw) - r.pos} unexpected trailing bytes")
    m = Matrices(ni, na, *mats)
    if m.nnz != nnz:
        raise PceError(f"{path}: header says {nnz} non-zeros, matrices hold {m.nnz}")
    if count != DIGEST_LEN or hashlib.sha256(raw[:body_end]).hexdigest() != stored:
        raise PceError(f"{path}: its matrices do not match its constraint digest (a changed value?)")
    if expected_digest is not None and stored != expected_digest:
        raise PceError(f"{path}: holds another circuit (constraint digest {stored[:16]}..., expected "
                       f"{expected_digest[:16]}...)")  # fmt: skip
    return m
