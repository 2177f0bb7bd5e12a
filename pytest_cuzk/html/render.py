"""The one Jinja2 environment both pages render through, and how a figure is shown by its name.

Figures carry their unit in their name (``rss_peak_bytes``, ``latency_p50_s``, ``sm_clock_mean_mhz``),
so one function shows any of them, also ones added to ``Figures`` after this page was written.
"""

from __future__ import annotations

import datetime as dt
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from pytest_cuzk.vocab.units import format_bytes, plural

__all__ = ["render", "show"]

_UNITS = (("_bytes", ""), ("_ms", " ms"), ("_s", " s"), ("_pct", " %"), ("_mhz", " MHz"), ("_hz", " Hz"))


def show(name: str, value: Any) -> str:
    """``value`` for people: bytes in MiB/GiB, times with their unit, lists as ranges; ``-`` for None."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return " – ".join(show(name, v) for v in value)
    if not isinstance(value, (int, float)):
        return str(value)
    if name.endswith("_bytes"):
        return format_bytes(value)
    unit = next((u for suffix, u in _UNITS if name.endswith(suffix)), "")
    if name.startswith("throughput") or name.endswith("per_hour"):
        unit = " /h"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value:,.{_digits(value)}f}{unit}"


def _digits(value: float) -> int:
    """Three significant figures for small values, one decimal for large ones."""
    size = abs(value)
    return 0 if size >= 1000 else 1 if size >= 10 else 2 if size >= 1 else 3


def _when(value: dt.datetime) -> str:
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _seconds(value: float) -> str:
    """``0.00412 s``, ``2.42 s``, ``12.3 s``, ``4 min 05 s``, ``1 h 02 min``."""
    if value < 60:
        return f"{value:.3g} s" if value < 10 else f"{value:.1f} s"
    minutes, secs = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _version() -> str:
    try:
        return version("pytest-cuzk")
    except PackageNotFoundError:
        return "unknown"


def render(template: str, **context: Any) -> str:
    """Render one of the package's templates with ``context``; a missing name is an error, not a blank."""
    env = Environment(
        loader=PackageLoader("pytest_cuzk.html", "templates"),
        autoescape=select_autoescape(["j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(show=show, bytes=format_bytes, when=_when, seconds=_seconds, plural=plural)
    env.globals["version"] = _version()
    return env.get_template(template).render(**context)
