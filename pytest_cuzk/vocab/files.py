"""Writing files so that no reader sees half of one, and hashing them.

Several daemons and xdist workers share caches (param caches, test data); a file appears
whole under its final name or not at all, and a failed write (a full disk) leaves no
temporary file behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

__all__ = ["HASH_CHUNK", "atomic_write", "file_sha256"]

HASH_CHUNK = 1 << 20


def atomic_write(path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place; returns ``path``.

    The temporary name is unique per process, and it is removed when the write fails,
    so a full disk leaves only the error, which names ``path`` (also as its ``filename``).
    """
    path = Path(path)
    blob = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror}", str(path)) from exc
    return path


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while chunk := fh.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
