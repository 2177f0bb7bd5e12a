"""A daemon's configuration as part of its build's identity: its keys, and a digest of them.

One cuzk binary tuned with two configs is two builds to compare, not one: its results must not
pool, and a comparison of the two must say which keys differ. The keys are the config as the
daemon reads it (``section.key`` flattened), less those the plugin sets for each start (the
listen address, the param cache, the batch size the test id names), with secret-like keys and
the passwords of URLs masked: they are kept in reports and databases.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_cuzk.vocab.redact import MASK, redact

__all__ = ["PLUGIN_SET", "DaemonConfig", "binary_of", "config_changes", "config_record", "differing"]

PLUGIN_SET = frozenset(
    {"daemon.listen", "daemon.status_listen", "srs.param_cache", "scheduler.max_batch_size"}
)
_SECRET = re.compile(r"pass|pwd|secret|token|credential|auth", re.IGNORECASE)
DIGEST_CHARS = 8


@dataclass(frozen=True)
class DaemonConfig:
    """A daemon's configuration keys (``section.key`` -> its value as TOML writes it, masked)."""

    keys: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """8 hex digits of the keys' sha256; ``default`` for a daemon on its built-in defaults."""
        if not self.keys:
            return "default"
        text = json.dumps(self.keys, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]

    @property
    def tag(self) -> str:
        """What a build's name ends with: ``config=3f2a9c1e``."""
        return f"config={self.digest}"


def _flat(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def _shown(name: str, value: Any) -> str:
    if _SECRET.search(name.rpartition(".")[2]):
        return MASK
    return redact(value if isinstance(value, str) else json.dumps(value))


def config_record(table: Mapping[str, Any], skip: frozenset[str] = PLUGIN_SET) -> DaemonConfig:
    """The record of a config as a daemon reads it (a parsed TOML document), the plugin's keys left out."""
    flat = _flat(table)
    return DaemonConfig({name: _shown(name, flat[name]) for name in sorted(flat) if name not in skip})


def binary_of(build: str) -> str:
    """A build's name without its config: two builds of one binary have the same."""
    return re.sub(r" config=\S+", "", build)


def config_changes(
    before: Mapping[str, Mapping[str, str]], after: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The keys that differ between runs of one binary under two configs (builds -> their keys)."""
    return [
        change
        for b, keys in after.items()
        for a, old in before.items()
        if a != b and binary_of(a) == binary_of(b)
        for change in differing(old, keys)
    ]


def differing(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """``key: A -> B`` for each key whose value differs (``unset`` where one config lacks it)."""
    return [
        f"{name}: {a.get(name, 'unset')} -> {b.get(name, 'unset')}"
        for name in sorted(set(a) | set(b))
        if a.get(name) != b.get(name)
    ]
