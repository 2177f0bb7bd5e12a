"""Data manifests: which file holds each kind's test data, how to check it, and the request fields.

A manifest (TOML) names each kind's data files (``[kinds.porep]`` for one, ``[[kinds.porep]]``
tables for several sectors), optionally with their sha256, size and a URL, plus the
``SubmitProofRequest`` fields each needs. Several sectors let a batch case submit distinct
sectors and check every proof against its own request. ``load_manifest`` validates
everything up front, and an error names the file, the key path and the fix.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from pytest_cuzk.core.errors import ManifestError
from pytest_cuzk.data.inputs import BYTES_FIELDS, INT_FIELDS
from pytest_cuzk.vocab.kinds import KINDS, UnknownKind, by_name
from pytest_cuzk.vocab.redact import redact

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["DataEntry", "Manifest", "load_manifest"]

_SHA256_RE = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class DataEntry:
    """One sector of a kind: its data file and the request fields it needs."""

    kind: str
    file: str
    sha256: str | None = None
    size: int | None = None
    url: str | None = None
    request: dict[str, Any] = field(default_factory=dict)
    key: str = ""

    @property
    def entry_key(self) -> str:
        """The TOML table path of this entry, for messages."""
        return self.key or f"kinds.{self.kind}"


@dataclass(frozen=True)
class Manifest:
    """A loaded data manifest: each kind's sectors; ``engine`` is set for data an engine generated."""

    path: Path
    entries: dict[str, tuple[DataEntry, ...]]
    engine: dict[str, Any] | None = None

    @property
    def dir(self) -> Path:
        """Where relative ``file`` names are looked up first."""
        return self.path.parent


def load_manifest(path: Path) -> Manifest:
    """Read and validate a data manifest; raise ManifestError naming the file, key path and the fix."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _error(
            path, "", f"cannot read the data manifest ({exc.strerror}); check --cuzk-manifest"
        ) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _error(path, "", f"not valid TOML ({exc}); fix the syntax") from exc
    for key in doc:
        if key not in ("kinds", "engine"):
            raise _error(path, key, "unknown top-level key; a data manifest has [kinds.<kind>] and [engine]")
    engine, kinds = doc.get("engine"), doc.get("kinds", {})
    if engine is not None and not isinstance(engine, dict):
        raise _error(path, "engine", "must be a table like [engine]")
    if not isinstance(kinds, dict):
        raise _error(path, "kinds", "must hold tables like [kinds.porep]")
    entries: dict[str, tuple[DataEntry, ...]] = {}
    for name, value in kinds.items():
        tables = value if isinstance(value, list) else [value]
        keys = (
            [f"kinds.{name}[{i}]" for i in range(len(tables))]
            if isinstance(value, list)
            else [f"kinds.{name}"]
        )
        sectors = tuple(_parse_entry(path, name, table, key) for table, key in zip(tables, keys, strict=True))
        if not sectors:
            raise _error(path, f"kinds.{name}", "an empty list; give at least one [[kinds.<kind>]] table")
        kind = sectors[0].kind
        if kind in entries:
            raise _error(path, sectors[0].key, f"same kind as [{entries[kind][0].key}]; keep one of them")
        entries[kind] = sectors
    return Manifest(path=path, entries=entries, engine=engine)


_ENTRY_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "file": (
        lambda v: isinstance(v, str) and _is_plain_relative(v),
        "must be a relative path inside the manifest's directory (use --cuzk-input KIND=PATH for others)",
    ),
    "sha256": (
        lambda v: isinstance(v, str) and _SHA256_RE.fullmatch(v.lower()) is not None,
        "must be 64 hex digits; fix it, or remove it to pin the sha256 of the first download",
    ),
    "size": (lambda v: type(v) is int and v >= 0, "must be a non-negative integer (bytes)"),
    "url": (
        lambda v: isinstance(v, str) and urlsplit(v).scheme in ("http", "https") and bool(urlsplit(v).netloc),
        "must be an http:// or https:// URL",
    ),
    "request": (lambda v: isinstance(v, dict), "must be a table of SubmitProofRequest fields"),
}


def _parse_entry(path: Path, name: str, table: Any, key: str) -> DataEntry:
    try:
        kind = by_name(name).name
    except UnknownKind:
        raise _error(path, key, f"unknown proof kind {name!r}; use one of: {', '.join(KINDS)}") from None
    if not isinstance(table, dict):
        raise _error(path, key, f"must be a table like [{key}] with file = ...")
    if "file" not in table:
        raise _error(path, f"{key}.file", 'missing; add file = "<name>" (relative to the manifest)')
    for field_name, value in table.items():
        if field_name not in _ENTRY_RULES:
            raise _error(path, f"{key}.{field_name}", f"unknown key; known keys: {', '.join(_ENTRY_RULES)}")
        valid, problem = _ENTRY_RULES[field_name]
        if not valid(value):
            raise _error(path, f"{key}.{field_name}", f"{problem}, got {value!r}")
    request = table.get("request", {})
    for field_name, value in request.items():
        _check_request_field(path, f"{key}.request.{field_name}", field_name, value)
    sha = table.get("sha256")
    return DataEntry(
        kind, table["file"], sha and sha.lower(), table.get("size"), table.get("url"), request, key
    )


def _error(path: Path, key: str, problem: str) -> ManifestError:
    return ManifestError(redact(f"{path}: {key}: {problem}" if key else f"{path}: {problem}"))


def _is_plain_relative(file: str) -> bool:
    parts = PurePosixPath(file).parts
    return bool(parts) and not file.startswith(("/", "\\")) and ".." not in parts and ":" not in parts[0]


def _check_request_field(path: Path, key: str, name: str, value: Any) -> None:
    if name in BYTES_FIELDS:
        try:
            bytes.fromhex(value if isinstance(value, str) else "not hex")
        except ValueError:
            raise _error(path, key, f'must be hex bytes in a string like "00ff...", got {value!r}') from None
    elif name in INT_FIELDS:
        if type(value) is not int or value < 0:
            raise _error(path, key, f"must be a non-negative integer, got {value!r}")
    else:
        known = ", ".join(INT_FIELDS + BYTES_FIELDS)
        raise _error(path, key, f"unknown request field; known fields: {known}")
