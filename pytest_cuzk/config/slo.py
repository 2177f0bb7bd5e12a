"""Latency bounds (SLOs) of the load scenarios: ``--cuzk-slo``, and each engine's defaults.

A bound is absolute (``winning:10s``, ``porep:30m``) or relative to the kind's own latency
measured idle (``porep:5x``: five times its idle p50). Under load, a bound may also allow
for background proofs ahead of the measured one: a daemon that honours priorities but cannot
preempt makes a PoSt wait for the work it already started. Which bound applies when
``--cuzk-slo`` names none is the engine profile's say (``EngineProfile.slo``): seconds for a
real cuzk, relative bounds for the reference engine, whose speed depends on the host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Slo", "parse_slo"]

_VALUE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|x)\s*$", re.IGNORECASE)
_SECONDS = {"s": 1.0, "m": 60.0}


@dataclass(frozen=True)
class Slo:
    """A latency bound: ``seconds``, or ``times_idle`` × the idle p50 plus ``background`` idle proofs."""

    seconds: float | None = None
    times_idle: float = 0.0
    background: float = 0.0  # background proofs (their idle p50 each) allowed ahead, under load
    source: str = ""  # where it comes from: "--cuzk-slo", "the cuzk default", ...

    @property
    def needs_background_idle(self) -> bool:
        return self.seconds is None and self.background > 0

    def bound(self, idle_p50_s: float, background_p50_s: float | None = None) -> float:
        """The bound in seconds, given the idle p50 of the kind (and of the background kind)."""
        if self.seconds is not None:
            return self.seconds
        allowance = self.background * background_p50_s if self.background and background_p50_s else 0.0
        return self.times_idle * idle_p50_s + allowance

    def describe(self, bound_s: float) -> str:
        """``10 s (the cuzk default)``, ``5x the idle p50 = 4.70 s (--cuzk-slo)``."""
        if self.seconds is not None:
            rule = f"{self.seconds:g} s"
        else:
            rule = "the idle p50" if self.times_idle == 1 else f"{self.times_idle:g}x the idle p50"
            rule += f" + {self.background:g} background proofs' idle p50" if self.background else ""
            rule += f" = {bound_s:.2f} s"
        return f"{rule} ({self.source})" if self.source else rule


def parse_slo(text: str, where: str) -> Slo:
    """One bound: ``10s``, ``30m`` or ``5x``; ValueError naming ``where`` and the forms."""
    match = _VALUE.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise ValueError(
            f"Invalid latency bound {text!r} from {where}: use seconds (10s), minutes (30m) or a "
            "multiple of the kind's idle p50 (5x), above 0"
        )
    value, unit = float(match.group(1)), match.group(2).lower()
    if unit == "x":
        return Slo(times_idle=value, source=where)
    return Slo(seconds=value * _SECONDS[unit], source=where)
