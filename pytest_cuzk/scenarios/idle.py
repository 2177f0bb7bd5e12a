"""A kind's latency measured idle: proofs one at a time, what relative bounds and slowdowns refer to.

The readiness chain has warmed the daemon up; these proofs run through the case measurement
(``measure.run_case``) with a fixed count, one proof per wave, so each meets an idle daemon. A
daemon configured to batch holds a lone proof for company: its idle latency includes that wait.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.plan import Plan, run_case
from pytest_cuzk.run.waves import CaseResult, Runner
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["IDLE_PROOFS", "idle_p50", "measure_idle"]

IDLE_PROOFS = 3


def measure_idle(runner: Runner, case: Case, kind: ProofKindInfo, settings: Settings) -> CaseResult:
    """``IDLE_PROOFS`` proofs of ``kind``, one at a time, on the case's daemon."""
    lone = dataclasses.replace(case, kind=kind, batch_size=1, concurrency=1, background=None)
    plan = Plan(IDLE_PROOFS, IDLE_PROOFS, math.inf, settings.window, settings.stability)
    return run_case(lone, runner, plan, None)


def idle_p50(result: CaseResult) -> float | None:
    """The median latency of the idle proofs that completed."""
    ok = [p.latency_s for p in result.ok]
    return round(float(np.median(ok)), 4) if ok else None
