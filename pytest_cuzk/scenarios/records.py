"""One frozen record per finished load scenario: what extra_info, the summary and the sinks read.

Like a case's ``Figures``, a scenario's figures are built once and read by attribute; its
``to_dict`` is pytest-benchmark's ``extra_info`` and the xdist wire format, and
``scenario_from_dict`` rebuilds it on the controller. Each record says its headline figure in
one line for the terminal summary. A figure that is None says why in ``na_reasons``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_cuzk.vocab.units import plural

__all__ = [
    "PriorityFigures",
    "RateStep",
    "ScenarioFigures",
    "ServerFigures",
    "SweepFigures",
    "SweepPoint",
    "scenario_from_dict",
]


def _n(value: float | None, spec: str = "{:.2f}") -> str:
    return "n/a" if value is None else spec.format(value)


@dataclass(frozen=True, kw_only=True)
class ScenarioFigures:
    """What every scenario reports: which test, what it proved, why it stopped, what failed."""

    scenario: ClassVar[str] = ""
    test: str
    label: str
    kind: str
    batch_size: int = 1
    proofs_ok: int = 0
    proofs_failed: int = 0
    wall_s: float = 0.0
    stop_reason: str = ""
    failures: tuple[str, ...] = ()  # the first 20 failed proofs, "job: error"
    why_failed: str = ""  # each distinct reason once, with how many proofs ("" when none failed)
    known_issue: str | None = None  # the engine's known bug that explains every failure
    rss_peak_bytes: int | None = None  # the daemon's, over the whole scenario
    na_reasons: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScenarioFigures:
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["failures"] = tuple(values.get("failures") or ())
        return cls(**values | cls._nested(values))

    @classmethod
    def _nested(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """Fields that come back from JSON as lists of dicts or lists: rebuilt as the record holds them."""
        return {}

    def headline(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class RateStep:
    """One rate the server scenario tried: Poisson arrivals at it, and whether their p99 held the bound."""

    rate_per_hour: float
    planned: int  # arrivals of the step
    sent: int  # sent before its outcome was decided
    late: int  # late or failed
    held: bool
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None
    latency_max_s: float | None = None
    goodput_proofs_per_hour: float | None = None
    send_lag_max_s: float = 0.0  # how late the client sent its latest request


@dataclass(frozen=True, kw_only=True)
class ServerFigures(ScenarioFigures):
    """``test_server``: the highest Poisson rate whose p99 latency held the bound, and every rate tried."""

    scenario: ClassVar[str] = "server"
    slo_s: float = 0.0
    slo: str = ""
    idle_latency_p50_s: float | None = None
    max_sustainable_rate_per_hour: float | None = None
    goodput_proofs_per_hour: float | None = None  # at that rate: proofs that met the bound, per hour
    latency_p50_s: float | None = None  # at that rate
    latency_p99_s: float | None = None
    latency_max_s: float | None = None
    rates: tuple[RateStep, ...] = ()

    @classmethod
    def _nested(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        return {"rates": tuple(RateStep(**r) for r in values.get("rates") or ())}

    def headline(self) -> str:
        tried = f"{plural(len(self.rates), 'rate')} tried ({self.stop_reason})"
        if self.max_sustainable_rate_per_hour is None:
            return f"no rate held p99 within {self.slo}; {tried}"
        return (
            f"max sustainable {self.max_sustainable_rate_per_hour:.1f}/h with p99 within {self.slo}, "
            f"goodput {_n(self.goodput_proofs_per_hour, '{:.1f}')}/h; {tried}"
        )


@dataclass(frozen=True, kw_only=True)
class PriorityFigures(ScenarioFigures):
    """``test_priority``: a PoSt kind's latency while background proofs saturate the daemon."""

    scenario: ClassVar[str] = "priority"
    priority: str = ""  # what the PoSt proofs were sent with (Curio's)
    background_kind: str = ""
    background_in_flight: int = 0
    background_throughput_proofs_per_hour: float | None = None
    background_idle_latency_p50_s: float | None = None
    idle_latency_p50_s: float | None = None
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None
    latency_max_s: float | None = None
    tail_basis: str = ""  # what the verdict rests on: the p99, or the slowest proof
    slowdown_vs_idle: float | None = None  # that figure over the idle p50
    slo_s: float = 0.0
    slo: str = ""
    slo_met: bool = False
    probes: int = 0  # PoSt proofs sent under load
    late: int = 0  # of them, late or failed
    background_proofs: int = 0
    latencies_s: tuple[float, ...] = ()  # of the PoSt proofs under load

    @classmethod
    def _nested(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        return {"latencies_s": tuple(values.get("latencies_s") or ())}

    def verdict(self) -> str:
        """The slowdown and the bound, in one sentence (a failure's message)."""
        judged = self.latency_p99_s if self.latency_p99_s is not None else self.latency_max_s
        idle = _n(self.idle_latency_p50_s, "{:.3f}")
        return (
            f"{self.kind} under {self.background_kind} load: {_n(judged)} s ({self.tail_basis}), "
            f"{_n(self.slowdown_vs_idle, '{:.1f}')}x its idle p50 of {idle} s; {self.late} of "
            f"{self.probes} late against the bound {self.slo}: {'met' if self.slo_met else 'MISSED'}"
        )

    def headline(self) -> str:
        background = _n(self.background_throughput_proofs_per_hour, "{:.1f}")
        return f"{self.verdict()}; {self.background_kind} {background}/h in the background"


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    """One level of the concurrency sweep: its proofs in flight and what it measured."""

    in_flight: int
    concurrency: int
    throughput_proofs_per_hour: float
    throughput_proofs_per_hour_ci: tuple[float, float] | None = None
    latency_p50_s: float | None = None
    latency_p90_s: float | None = None
    proofs: int = 0
    gain_pct: float | None = None  # over the best level before it
    stop_reason: str = ""


@dataclass(frozen=True, kw_only=True)
class SweepFigures(ScenarioFigures):
    """``test_sweep``: throughput at 1, 2, ... proofs in flight, and the knee where it stops growing."""

    scenario: ClassVar[str] = "sweep"
    curve: tuple[SweepPoint, ...] = ()
    knee_in_flight: int | None = None
    knee_concurrency: int | None = None
    knee_throughput_proofs_per_hour: float | None = None
    max_throughput_proofs_per_hour: float | None = None

    @classmethod
    def _nested(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        points = []
        for p in values.get("curve") or ():
            ci = p.get("throughput_proofs_per_hour_ci")
            points.append(SweepPoint(**p | {"throughput_proofs_per_hour_ci": tuple(ci) if ci else None}))
        return {"curve": tuple(points)}

    def headline(self) -> str:
        levels = ", ".join(f"{p.in_flight}: {p.throughput_proofs_per_hour:.1f}/h" for p in self.curve)
        if self.knee_in_flight is None:
            return f"no knee ({self.stop_reason}); {levels}"
        return (
            f"knee at {self.knee_in_flight} in flight (j{self.knee_concurrency}, "
            f"{_n(self.knee_throughput_proofs_per_hour, '{:.1f}')}/h) ({self.stop_reason}); {levels}"
        )


_KINDS: dict[str, type[ScenarioFigures]] = {
    c.scenario: c for c in (ServerFigures, PriorityFigures, SweepFigures)
}


def scenario_from_dict(data: Mapping[str, Any]) -> ScenarioFigures:
    """Rebuild a record sent by ``to_dict`` (from an xdist worker)."""
    return _KINDS[str(data["scenario"])].from_dict(data)
