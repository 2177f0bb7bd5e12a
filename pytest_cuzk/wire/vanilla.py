"""The data file formats of cuzk's tools: vanilla proofs, and PoRep's C1 output wrapper.

Vanilla proofs are a JSON array of base64 strings: ``cuzk-bench gen-vanilla`` writes it and
``cuzk-bench --vanilla`` reads it; like cuzk-bench, a file that is not such an array is read
as one raw proof. PoRep's data is the C1 output wrapper JSON (``Phase1Out``, base64).
``format_problem`` says whether bytes are a whole file of their kind's format, which is how
a download without a pinned sha256 is known not to be cut short.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path

from .files import atomic_write
from .units import MAX_MESSAGE_BYTES

__all__ = ["format_problem", "largest_file", "read_vanilla_proofs", "write_vanilla_proofs"]


def largest_file(kind: str) -> int:
    """The most bytes a data file of ``kind`` can have and still fit in a request cuzk accepts.

    PoRep's C1 wrapper is sent whole; a JSON array of base64 proofs carries 3 bytes in 4, and
    its punctuation is allowed for.
    """
    return MAX_MESSAGE_BYTES if kind == "porep" else MAX_MESSAGE_BYTES * 3 // 2


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


def format_problem(kind: str, raw: bytes) -> str | None:
    """Why ``raw`` is not a whole data file of ``kind`` (``porep`` or a vanilla kind); None when it is.

    A raw (non-JSON) vanilla proof has no structure to check, and says so.
    """
    if kind == "porep":
        return _c1_problem(raw)
    if not raw.lstrip().startswith(b"["):
        return "a raw vanilla proof (not a JSON array of base64 strings): its completeness cannot be checked"
    try:
        items = json.loads(raw)
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            return "not a JSON array of base64 strings"
        for item in items:
            base64.b64decode(item, validate=True)
    except (UnicodeDecodeError, ValueError) as exc:
        return f"not a complete JSON array of base64 strings ({exc})"
    return None


def _c1_problem(raw: bytes) -> str | None:
    try:
        wrapper = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        return f"not complete C1 output wrapper JSON ({exc})"
    if not isinstance(wrapper, dict) or not isinstance(wrapper.get("Phase1Out"), str):
        return "not a C1 output wrapper (a JSON object with Phase1Out, SectorNum and SectorSize)"
    try:
        base64.b64decode(wrapper["Phase1Out"], validate=True)
    except binascii.Error as exc:
        return f"its Phase1Out is not base64 ({exc})"
    return None
