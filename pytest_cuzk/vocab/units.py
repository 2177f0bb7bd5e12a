"""Sizes and thresholds as people and cuzk's config write them: ``200GiB``, ``512 MB``, ``rss_peak:10%``."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

__all__ = [
    "GIB",
    "MAX_MESSAGE_BYTES",
    "MIB",
    "format_bytes",
    "parse_percent",
    "parse_size",
    "parse_thresholds",
    "plural",
    "rough_duration",
]

MIB = 1 << 20
GIB = 1 << 30
MAX_MESSAGE_BYTES = 128 * MIB  # cuzk-daemon's (tonic's) decode and encode limit: the largest request

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "kib": 2**10, "mb": 10**6, "mib": 2**20, "gb": 10**9, "gib": 2**30}
_UNITS |= {"tb": 10**12, "tib": 2**40}


def parse_size(text: str, where: str) -> int:
    """Bytes from a size; ``where`` (an option, a config key) names the source in the ValueError."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"Invalid size {text!r} from {where}: use a number with B, MB, MiB, GB or GiB")
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "b").lower()])


def format_bytes(n: float | None, unknown: str = "n/a") -> str:
    """``180.0 GiB``, ``1.23 GiB``, ``512 MiB``, ``340 KiB``; ``unknown`` for None (the one byte formatter).

    Under a MiB it says KiB: a small reference engine's budget is not "0 MiB".
    """
    if n is None:
        return unknown
    if abs(n) >= 10 * GIB:
        return f"{n / GIB:.1f} GiB"
    if abs(n) >= GIB:
        return f"{n / GIB:.2f} GiB"
    if 0 < abs(n) < MIB:
        return f"{n / 1024:.0f} KiB"
    return f"{n / MIB:.0f} MiB"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 window``, ``2 windows``, ``0 GPUs``: a count with its noun (``many``: an irregular plural)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def parse_percent(text: str, where: str) -> float:
    """A percentage from ``15%`` (or ``15``); ``where`` names the source in the ValueError."""
    try:
        value = float(str(text).strip().removesuffix("%"))
    except ValueError:
        raise ValueError(f"Invalid percentage {text!r} from {where}: write it like 15%") from None
    if not math.isfinite(value):
        raise ValueError(f"Invalid percentage {text!r} from {where}: write a finite number like 15%")
    if value < 0:
        raise ValueError(f"Invalid percentage {text!r} from {where}: it cannot be negative")
    return value


def parse_thresholds(text: str, metrics: Iterable[str], where: str) -> dict[str, float]:
    """Percentages by metric from ``throughput:5%,rss_peak:10%`` (the pytest gate and cuzk-perf's)."""
    known = tuple(metrics)
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        name, sep, limit = part.partition(":")
        if not sep or name.strip() not in known:
            choices = ", ".join(known)
            raise ValueError(
                f"Invalid threshold {part!r} from {where}: write METRIC:N% with METRIC one of {choices}"
            )
        if not limit.strip().endswith("%"):  # a bare 5 could be read as a fraction or an absolute
            why = f"give the limit in percent ({name.strip()}:{limit.strip() or 5}%)"
            raise ValueError(f"Invalid threshold {part!r} from {where}: {why}")
        out[name.strip()] = parse_percent(limit, where)
    return out


def rough_duration(seconds: float) -> str:
    """``~40 s``, ``~4 min``, ``~1.5 h``: an estimate, rounded as one."""
    if seconds < 90:
        return f"~{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"~{seconds / 60:.0f} min"
    return f"~{seconds / 3600:.1f} h"
