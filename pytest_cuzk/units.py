"""Byte sizes as people and cuzk's config write them: ``200GiB``, ``512 MB`` or a plain byte count."""

from __future__ import annotations

import re

__all__ = ["parse_size"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "kib": 2**10, "mb": 10**6, "mib": 2**20, "gb": 10**9, "gib": 2**30}
_UNITS |= {"tb": 10**12, "tib": 2**40}


def parse_size(text: str, where: str) -> int:
    """Bytes from a size; ``where`` (an option, a config key) names the source in the ValueError."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"Invalid size {text!r} from {where}: use a number with B, MB, MiB, GB or GiB")
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "b").lower()])
