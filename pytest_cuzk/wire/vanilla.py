"""The vanilla-proof file format of cuzk's tools: a JSON array of base64 strings.

``cuzk-bench gen-vanilla`` writes it and ``cuzk-bench --vanilla`` reads it; like
cuzk-bench, a file that is not such an array is read as one raw proof.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path

from .files import atomic_write

__all__ = ["read_vanilla_proofs", "write_vanilla_proofs"]


def read_vanilla_proofs(path: Path) -> list[bytes]:
    """Read a vanilla-proofs file: a JSON array of base64 strings, else the whole file as one proof."""
    raw = Path(path).read_bytes()
    try:
        items = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return [raw]
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return [raw]
    try:
        return [base64.b64decode(i, validate=True) for i in items]
    except binascii.Error as exc:
        raise ValueError(f"{path}: not a JSON array of base64 strings ({exc})") from exc


def write_vanilla_proofs(path: Path, proofs: list[bytes]) -> None:
    """Write vanilla proofs in cuzk-bench's ``--vanilla`` format."""
    atomic_write(path, json.dumps([base64.b64encode(p).decode() for p in proofs]))
