"""``test_priority``: a PoSt kind's latency while sealing proofs saturate the daemon, against its bound.

A WinningPoSt that waits behind sealing loses its block (rust-fil-proofs#1334, lotus#5955), a
WindowPoSt its deadline. cuzk orders its queue by priority for this. The scenario measures both
kinds idle first, then keeps ``--cuzk-background-in-flight`` background proofs in flight (sent
with NORMAL priority, as Curio sends sealing proofs) and, once the first of them is answered,
sends PoSt proofs one at a time with Curio's priority for the kind (HIGH for WindowPoSt, CRITICAL
for WinningPoSt). Each is sent a random time after the last one answered, up to one background
proof's idle latency, so they arrive at every point of the background's work. Its latency counts
from when it was due. The verdict is ``bounds.Tail``'s: once it is known to miss, no more are sent.
"""

from __future__ import annotations

import time
from typing import Any, cast

import numpy as np

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.proto import pb
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.execution import Running
from pytest_cuzk.run.waves import ProofOutcome, Runner, Wave, check_wave, run_wave
from pytest_cuzk.scenarios.background import Background
from pytest_cuzk.scenarios.bounds import Budget, Tail
from pytest_cuzk.scenarios.idle import idle_p50, measure_idle
from pytest_cuzk.scenarios.records import PriorityFigures
from pytest_cuzk.scenarios.search import SEED
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["Priority"]


class Priority:
    """A PoSt kind (the case's) under a background kind's load, on one daemon."""

    def __init__(self, case: Case, run: Running, settings: Settings, budget: Budget) -> None:
        assert case.background is not None, "a priority case names its background kind"
        self.case, self.post, self.load = case, case.kind, case.background
        self.runner, self.load_runner = run.runner(case.kind), run.runner(case.background)
        self.progress = run.progress
        self.settings = settings
        self.budget = budget
        self.slo = settings.slo.get(self.post.name) or run.backend.profile().slo(self.post, self.load)
        self.proofs: list[ProofOutcome] = []
        self.probes: list[ProofOutcome] = []
        self.stop_reason = ""
        self.idle_p50: float | None = None
        self.load_idle_p50: float | None = None
        self.bound_s = 0.0
        self.load_per_hour: float | None = None
        self.load_proofs = 0

    def run(self) -> None:
        self.idle_p50 = self._idle(self.runner, self.post)
        self.load_idle_p50 = self._idle(self.load_runner, self.load) if self.idle_p50 is not None else None
        if self.idle_p50 is None or self.load_idle_p50 is None:
            self.stop_reason = "a proof failed"
            return
        self.bound_s = self.slo.bound(self.idle_p50, self.load_idle_p50)
        load = Background(self.load_runner, self.load, self.settings.background_in_flight, pb.NORMAL)
        try:
            self._under(load)
        except BaseException:
            self.runner.client.close()  # the load's awaits end at once: nothing waits for a test that failed
            raise
        finally:
            answered = load.stop(self.settings.proof_timeout)
            wave = Wave([r for r, _, _ in answered], [p for _, p, _ in answered], [a for _, _, a in answered])
            self.proofs += check_wave(self.load_runner, self.load, wave)
            self.load_proofs = len(answered)
            self.budget.spend(len(answered))

    def _idle(self, runner: Runner, kind: ProofKindInfo) -> float | None:
        """The idle p50 of ``kind``; None when an idle proof failed."""
        idle = measure_idle(runner, self.case, kind, self.settings)
        self.proofs += idle.proofs
        self.budget.spend(len(idle.proofs))
        return None if idle.failed else idle_p50(idle)

    def _under(self, load: Background) -> None:
        """Start the load, wait for its steady state, then send the PoSt proofs one at a time."""
        what = f"{self.load.name} load of {load.depth} in flight"
        with self.progress.stage(
            f"{self.case.id}: {self.load.name} load starting", self.settings.proof_timeout
        ):
            self.runner.tick = self.progress.tick
            load.start()
            load.first_answer(lambda: self.runner.watch(what), self.settings.proof_timeout)
        if load.error is not None:
            raise load.error
        rng = np.random.default_rng(SEED)
        start, last = time.monotonic(), self.bound_s
        with self.progress.stage(f"{self.case.id}: {self.post.name} proofs under {what}"):
            while not (why := self._done(load)):
                gap = float(rng.uniform(0, self.load_idle_p50 or 0.0))
                if why := self.budget.admit(gap + last, 1, least=len(self.probes) < self.settings.proofs):
                    break
                last = self._probe(gap)
        self.stop_reason = why
        end = time.monotonic()
        self.load_per_hour = round(load.completed_between(start, end) / (end - start) * 3600, 3)

    def _done(self, load: Background) -> str:
        """Why no more PoSt proofs are sent: the verdict is known, or a proof failed ("" when neither)."""
        if any(not p.ok for p in self.probes) or any(not r.ok for _, r, _ in load.answered):
            return "a proof failed"
        if load.error is not None:
            return f"the {self.load.name} load stopped: {load.error}"
        tail = Tail.of(self.probes, self.bound_s, max(self.settings.proofs, len(self.probes)))
        return f"a {self.post.name} proof missed the bound" if tail.late > tail.allowed else ""

    def _probe(self, gap: float) -> float:
        """One PoSt proof with Curio's priority for it, due ``gap`` seconds from now; its latency."""
        req = self.runner.make_request()
        req.priority = cast("pb.Priority", self.post.default_priority)
        self.runner.tick = lambda: self.progress.tick(f"{len(self.probes)} done, bound {self.bound_s:.2f} s")
        wave = run_wave(self.runner, self.post, Wave([req], offsets=[gap]))
        (record,) = check_wave(self.runner, self.post, wave)
        self.probes.append(record)
        self.proofs.append(record)
        self.budget.spend(1)
        return record.latency_s

    def figures(self, **shared: Any) -> PriorityFigures:
        tail = Tail.of(self.probes, self.bound_s, max(self.settings.proofs, len(self.probes)))
        reasons: dict[str, str] = dict(shared.pop("na_reasons"))
        p99, why = tail.percentile(99)
        if why:
            reasons["latency_p99_s"] = f"{why}; the verdict rests on the slowest"
        judged = tail.judged_s
        return PriorityFigures(
            **shared,
            na_reasons=reasons,
            priority=pb.Priority.Name(self.post.default_priority),
            background_kind=self.load.name,
            background_in_flight=self.settings.background_in_flight,
            background_throughput_proofs_per_hour=self.load_per_hour,
            background_idle_latency_p50_s=self.load_idle_p50,
            idle_latency_p50_s=self.idle_p50,
            latency_p50_s=tail.percentile(50)[0],
            latency_p99_s=p99,
            latency_max_s=tail.slowest,
            tail_basis=tail.basis,
            slowdown_vs_idle=round(judged / self.idle_p50, 3) if judged and self.idle_p50 else None,
            slo_s=round(self.bound_s, 4),
            slo=self.slo.describe(self.bound_s),
            slo_met=tail.met,
            probes=len(self.probes),
            late=tail.late,
            background_proofs=self.load_proofs,
            latencies_s=tail.latencies,
        )
