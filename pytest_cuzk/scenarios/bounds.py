"""A scenario's bounds: its budget of seconds and proofs, and latencies judged against a latency bound.

The budget is ``--cuzk-scenario-budget`` seconds and ``--cuzk-max-proofs`` proofs in all; no step
starts that would end past either, except those of the scenario's minimum (it measures something). Latencies
meet their bound when at most 1% of the proofs were late (or failed): their p99 is within it. A
p99 of fewer than 100 proofs would be the slowest proof passed off as a p99, so then none may be
late, which is the slowest proof judged, and said so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_cuzk.measure import stats
from pytest_cuzk.run.waves import ProofOutcome

__all__ = ["Budget", "Tail"]

_TAIL_Q = 99


@dataclass
class Budget:
    """Seconds since the scenario started and proofs spent, against their bounds."""

    seconds: float
    proofs: int
    started: float = field(default_factory=time.monotonic)
    spent: int = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def admit(self, seconds: float, proofs: int, least: bool = False) -> str:
        """Why a step of about ``seconds`` and ``proofs`` may not start; "" admits it.

        ``least``: the step is part of the scenario's minimum, admitted whatever it costs.
        """
        if not least and self.spent + proofs > self.proofs:
            return f"--cuzk-max-proofs {self.proofs} would be passed"
        if not least and self.elapsed() + seconds > self.seconds:
            return f"the {self.seconds:g} s budget (--cuzk-scenario-budget) would be overrun"
        return ""

    def spend(self, proofs: int) -> None:
        self.spent += proofs

    @property
    def proofs_left(self) -> int:
        return max(0, self.proofs - self.spent)


@dataclass(frozen=True)
class Tail:
    """Proofs' latencies against a bound: how many were late, and the figure the verdict rests on."""

    latencies: tuple[float, ...]  # of the proofs that completed
    bound_s: float
    failed: int = 0
    planned: int = 0  # proofs meant to run; a set cut short once its verdict was known runs fewer

    @classmethod
    def of(cls, outcomes: Sequence[ProofOutcome], bound_s: float, planned: int) -> Tail:
        ok = tuple(round(r.latency_s, 4) for r in outcomes if r.ok)
        return cls(ok, bound_s, sum(1 for r in outcomes if not r.ok), max(planned, len(outcomes)))

    @property
    def late(self) -> int:
        return self.failed + sum(1 for v in self.latencies if v > self.bound_s)

    @property
    def allowed(self) -> int:
        """Late proofs a p99 within the bound allows: 1%, none below 100 proofs."""
        return self.planned // 100

    @property
    def met(self) -> bool:
        return bool(self.latencies) and self.late <= self.allowed

    def percentile(self, q: float) -> tuple[float | None, str | None]:
        value, why = stats.percentile(self.latencies, q)
        return (None if value is None else round(value, 4)), why

    @property
    def p99(self) -> float | None:
        return self.percentile(_TAIL_Q)[0]

    @property
    def slowest(self) -> float | None:
        return max(self.latencies, default=None)

    @property
    def judged_s(self) -> float | None:
        """The p99, or with fewer than 100 proofs the slowest one."""
        return self.p99 if self.p99 is not None else self.slowest

    @property
    def basis(self) -> str:
        if self.p99 is not None:
            return "p99"
        return f"the slowest of {len(self.latencies)}; a p99 needs {stats.percentile_floor(_TAIL_Q)}"

    def goodput_per_hour(self, seconds: float) -> float | None:
        """Proofs per hour that met the bound, over ``seconds``."""
        met = sum(1 for v in self.latencies if v <= self.bound_s)
        return round(met / seconds * 3600, 3) if seconds > 0 else None
