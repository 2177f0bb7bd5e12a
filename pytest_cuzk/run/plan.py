"""The measurement plan of a case: waves grouped into windows until the figures are stable.

Warm-up proofs are not measured: the readiness chain proved one of each kind before the case.
Then waves run, grouped into windows of at least ``--cuzk-window`` seconds; the case is stable
once the last three windows agree within ``--cuzk-stability`` percent on throughput and on
median latency (the rule of Triton's perf_analyzer). The bounds: at least ``--cuzk-proofs``
proofs, at most ``--cuzk-max-proofs``, and no new wave once ``--cuzk-case-budget`` seconds are
spent or the next wave would overrun them. The minimum wins over the budget, as
pytest-benchmark's ``min_rounds`` wins over its ``max_time``. A wave with a failed proof ends
the case: the test fails anyway, and more proofs would only spend time.

Windows that agree are not enough when proofs outlast a window (each window is then one wave):
three one-proof windows agree by chance while the proofs slow down. A case is stable only over
at least ``STABLE_MIN_PROOFS`` proofs whose latencies show no drift (the 95% interval of a
line's slope through them, in order, includes zero); else it says "too few proofs to call
stable" or "drifting: N% over the run".

A run compared with ``--cuzk-compare-fail`` is sized by the confidence the gate needs (as MLPerf
sizes a run by its percentile's): stable is not enough until each gated figure's 95% interval is
within ``GATE_SHARE`` (a third) of its limit, over at least ``PRECISE_WINDOWS`` windows, so that
two such runs catch a change of twice the limit nine times in ten. A run saved for later
comparison (``--benchmark-save``, ``--benchmark-autosave``) is sized the same way, for
``SAVED_PRECISION`` when it gates nothing itself. Short of that precision such a run may measure
up to ``PRECISION_BUDGETS`` case budgets, and then says how long this host would need: on the GPU
prover every gated run of the H100 host ended at one budget with an interval of ±4 to 6%, and a
planted 10% slow-down measured inside it is "not significantly beyond" a 5% limit.

Each wave is one pytest-benchmark round through ``benchmark.pedantic``: a round's setup checks
the previous wave and builds the next wave's requests, so neither is in the round's time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core.compat import benchmark_whole
from pytest_cuzk.core.progress import ProgressLine
from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import METRICS
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.tally import case_samples
from pytest_cuzk.run.waves import CaseResult, Runner, Wave, check_wave, run_wave
from pytest_cuzk.vocab.units import plural, rough_duration

__all__ = [
    "GATE_SHARE",
    "PRECISE_WINDOWS",
    "PRECISION_BUDGETS",
    "SAVED_PRECISION",
    "STABLE_MIN_PROOFS",
    "STABLE_WINDOWS",
    "CaseClock",
    "Plan",
    "PlanDone",
    "Rounds",
    "drive",
    "run_case",
    "stability",
    "stable",
]

STABLE_WINDOWS = 3
STABLE_MIN_PROOFS = 8
"""Fewest proofs a case is called stable over: a line through fewer has too few degrees of freedom
for its slope's interval to show a drift (over 3 proofs it spans hundreds of percent)."""
PRECISE_WINDOWS = 6
"""Fewest windows a compared or saved run measures: three calm windows (15 s) can meet the
precision by luck of one host state, and on the H200 host such runs were the ones whose
figure stood furthest from the same build's other runs."""
PRECISION_BUDGETS = 3
"""Case budgets a compared or saved run may measure while its interval is wider than the gate needs."""
GATE_SHARE = 1 / 3
"""How close to its limit a gated figure's 95% half-interval must come in each of the two runs.

The change between them then has an interval of about ±0.47 limits (the two in quadrature), and a
change of twice the limit (a planted 10% slow-down at a 5% gate: 9.1% fewer proofs an hour, 1.82
limits) lies wholly beyond the limit 93 times in 100; at half the limit it was 62 in 100. An
unchanged build lands beyond it almost never (3 standard errors away)."""
SAVED_PRECISION = (("throughput", 5.0 * GATE_SHARE),)
"""A run saved with no gate is a baseline to come: measured until its throughput's interval is
within what a 5% throughput gate asks of the run compared with it (±1.7%)."""


@dataclass(frozen=True)
class Plan:
    """How long a case measures: proofs and seconds bounds, window length, and the stability rule."""

    min_proofs: int
    max_proofs: int
    budget_s: float
    window_s: float
    stability_pct: float
    precision: tuple[tuple[str, float], ...] = ()  # (metric, widest 95% half-interval in percent)

    @classmethod
    def of(cls, settings: Settings, saving: bool = False) -> Plan:
        """The settings' plan; a run saved as a baseline is measured as a gated run would be."""
        precision = tuple(
            (name, limit * GATE_SHARE)
            for name, limit in settings.compare_fail.items()
            if METRICS[name].sample
        )
        return cls(
            min_proofs=settings.proofs,
            max_proofs=settings.max_proofs,
            budget_s=settings.case_budget,
            window_s=settings.window,
            stability_pct=settings.stability,
            precision=precision or (SAVED_PRECISION if saving else ()),
        )

    def max_waves(self, in_flight: int) -> int:
        return max(1, math.ceil(self.max_proofs / in_flight))

    def expected_waves(self, wave_s: float, in_flight: int) -> int:
        """Waves it runs when each takes ``wave_s``: its minimum, else as many as end within its budget.

        It stops before a wave that would end past the budget; stability may end it sooner, so this
        is what a case takes at most (at real speed, where a few long proofs never settle, what it takes).
        """
        least = max(1, math.ceil(self.min_proofs / in_flight))
        within = math.floor(self.budget_s / wave_s) if wave_s > 0 and math.isfinite(self.budget_s) else least
        return min(self.max_waves(in_flight), max(least, within))


class PlanDone(Exception):
    """Raised by a round's setup when the plan is done: ends ``benchmark.pedantic``'s rounds there."""


def _window_figures(waves: list[Wave]) -> tuple[float, float]:
    """A window's throughput (proofs per hour of its waves' time) and median latency."""
    ok = [r.latency_s for w in waves for r in w.records if r.ok]
    seconds = sum(w.seconds for w in waves)
    return len(ok) / seconds * 3600 if seconds else 0.0, float(np.median(ok)) if ok else 0.0


def stable(windows: list[list[Wave]], stability_pct: float) -> bool:
    """Whether the last 3 windows' throughput and median latency are each within the band of their mean."""
    if len(windows) < STABLE_WINDOWS:
        return False
    figures = np.array([_window_figures(w) for w in windows[-STABLE_WINDOWS:]])
    means = figures.mean(axis=0)
    if not means.all():
        return False
    return bool((np.abs(figures / means - 1) <= stability_pct / 100).all())


def stability(windows: list[list[Wave]], latencies: list[float], stability_pct: float) -> tuple[bool, str]:
    """Whether the case is stable, and what to say of it: the windows' agreement and the proofs' drift."""
    n, band = len(latencies), f"{stability_pct:g}%"
    if n < STABLE_MIN_PROOFS:
        return False, f"too few proofs to call stable ({n}; a drift test needs {STABLE_MIN_PROOFS})"
    moved = stats.drift(latencies)
    assert moved is not None, "enough latencies for a line"
    low, high = moved.interval
    trend = f"{moved.change_pct:+.1f}% over the run (95% interval {low:+.1f}% to {high:+.1f}%)"
    if moved.drifting():
        return False, f"drifting: latency {trend}"
    if not stable(windows, stability_pct):
        return False, f"not stable: the last {plural(min(len(windows), 3), 'window')} differ by over {band}"
    return True, f"stable: the last {STABLE_WINDOWS} windows agree within {band}, no drift ({trend})"


@dataclass
class CaseClock:
    """What the run's plan knows while a case runs: a wave's cost before any ran, and the run after it."""

    wave_s: float | None = None
    run_left: Callable[[], float | None] = lambda: None  # seconds of the run after this case
    waves_done: Callable[[float], None] = lambda wave_s: None  # told the case's mean wave as it goes


def _within(half: float | None, want: float) -> bool:
    """A figure's 95% half-interval meets what its gate needs; nothing meets a 0% limit's 0%.

    A steady daemon's windows can come out alike to the rounding of their seconds (half 0.0),
    which would otherwise end a run as precise for a limit no measurement can meet.
    """
    return half is not None and want > 0 and half <= want


class Measurement:
    """One case's waves, windows and stopping decision; pedantic's setup and target are its methods."""

    def __init__(
        self,
        case: Case,
        runner: Runner,
        plan: Plan,
        result: CaseResult | None = None,
        clock: CaseClock | None = None,
    ) -> None:
        self.case = case
        self.runner = runner
        self.plan = plan
        self.clock = clock or CaseClock()
        self.result = result if result is not None else CaseResult(case)
        self._start = time.monotonic()
        self._windows: list[list[Wave]] = []
        self._open: list[Wave] = []
        self._unchecked: Wave | None = None
        self._precise = not plan.precision
        self._settled = False  # stable as of the last window that closed
        self._settled_at = self._start  # when the last wave was checked

    def setup(self) -> tuple[tuple[Wave], dict[str, Any]]:
        """Check the last wave (untimed), then stop, or build the next wave's requests (untimed)."""
        self.settle()
        if self.result.stop_reason:
            raise PlanDone(self.result.stop_reason)
        return (Wave(self.runner.requests(self.case.in_flight, self.case.in_flight_said())),), {}

    def timed(self, wave: Wave) -> None:
        """The timed round: submit the wave and await every answer."""
        if self.runner.mark is not None:
            self.runner.mark(f"wave {len(self.result.waves) + 1}")
        self._unchecked = run_wave(self.runner, self.case.kind, wave)

    def settle(self) -> None:
        """Check the wave that just ran, file it in its window and decide whether the plan is done."""
        wave, self._unchecked = self._unchecked, None
        if wave is None:
            return
        self.result.proofs.extend(check_wave(self.runner, self.case.kind, wave))
        wave.window = len(self._windows)
        self.result.waves.append(wave)
        self._open.append(wave)
        if sum(w.seconds for w in self._open) >= self.plan.window_s:
            self._windows.append(self._open)
            self._open = []
            self._precise = self._precise or self._precise_enough()
            self._settled = stability(self._windows, self._latencies(), self.plan.stability_pct)[0]
        self.clock.waves_done(self._mean_wave())
        self.result.stop_reason = self._stop_reason()

    @property
    def closed(self) -> int:
        """Measurement windows closed so far."""
        return len(self._windows)

    def _precise_enough(self) -> bool:
        """Each gated figure's 95% interval is within its share of the limit (checked as windows close)."""
        return len(self._windows) >= PRECISE_WINDOWS and all(
            _within(half, want) for _, half, want in self._intervals()
        )

    def _intervals(self) -> list[tuple[str, float | None, float]]:
        """(gated figure, its 95% half-interval in percent so far, the half-interval the gate needs)."""
        samples = case_samples(self.result)
        out = []
        for name, want in self.plan.precision:
            metric = METRICS[name]
            assert metric.sample is not None and metric.estimator is not None, "only sampled metrics"
            out.append((name, stats.half_width_pct(samples.series(metric.sample), metric.estimator), want))
        return out

    def _time_to_precision(self, elapsed: float) -> str:
        """Why the run is short of its gate's precision, and how long this host would take to reach it.

        An interval narrows as 1/sqrt(time): on the GPU hosts each vCPU's speed swings about 25%
        within half a second, independently of the others, noise that averages out over time.
        """
        if len(self._windows) < PRECISE_WINDOWS:
            closed = plural(len(self._windows), "window")
            return f" (it closed {closed} of the {PRECISE_WINDOWS} a gated run needs)"
        intervals = self._intervals()
        unknown = [name for name, half, _ in intervals if half is None]
        if unknown:
            return f" ({', '.join(unknown)}: no interval yet)"
        wide = [
            (n, half, want) for n, half, want in intervals if half is not None and not _within(half, want)
        ]
        if not wide:
            return ""
        name, half, want = max(wide, key=lambda w: w[1] / w[2] if w[2] > 0 else math.inf)
        if want <= 0:
            return f" ({name} ±{half:.2g}%: a 0% limit is never precise enough)"
        needed = elapsed * (half / want) ** 2
        budget = max(5, math.ceil(needed / PRECISION_BUDGETS / 5) * 5)
        return (
            f" ({name} ±{half:.2g}%, the gate needs ±{want:.2g}%: about {needed:.0f} s of measuring on this "
            f"host would reach it, as --cuzk-case-budget={budget} allows)"
        )

    def _stop_reason(self) -> str:
        plan, done = self.plan, len(self.result.proofs)
        elapsed = time.monotonic() - self._start
        if self.result.failed:
            return "a proof failed"
        if done >= plan.max_proofs:
            return f"--cuzk-max-proofs {plan.max_proofs} reached"
        if done < plan.min_proofs:
            return ""
        if self._settled and self._precise:
            return f"stable after {plural(len(self._windows), 'window')}"
        budget = f"{plan.budget_s:g} s time budget (--cuzk-case-budget)"
        next_end = elapsed + elapsed / len(self.result.waves)
        if self._precise and elapsed > plan.budget_s and done - self.case.in_flight < plan.min_proofs:
            return (
                f"{plural(done, 'proof')}, the minimum, took {elapsed / plan.budget_s:.1f}x the "
                f"{plan.budget_s:g} s budget (--cuzk-case-budget)"
            )
        if self._precise and next_end > plan.budget_s:
            return f"the {budget} would be overrun"
        if next_end > PRECISION_BUDGETS * plan.budget_s:
            short = f"short of the compare gate's precision{self._time_to_precision(elapsed)}"
            return f"{PRECISION_BUDGETS} times the {budget} would be overrun, {short}"
        return ""

    def _latencies(self) -> list[float]:
        return [p.latency_s for p in self.result.ok]

    def _mean_wave(self) -> float:
        """Seconds per wave so far, the checks between waves included: what the next wave will cost."""
        self._settled_at = time.monotonic()
        return (self._settled_at - self._start) / max(1, len(self.result.waves))

    def progress(self) -> str:
        """The case's progress line: proofs done of those it will run, and the time left (case and run)."""
        done, waves, case = len(self.result.proofs), len(self.result.waves), self.case
        wave = (self._settled_at - self._start) / waves if waves else self.clock.wave_s
        if wave is None:
            return f"{done} of at least {self.plan.min_proofs} proofs done"
        total = max(self.plan.expected_waves(wave, case.in_flight), waves + (not self.result.stop_reason))
        # the wave under way, at least what is left of a mean one, then the waves after it
        under_way = max(0.0, wave - (time.monotonic() - self._settled_at)) if total > waves else 0.0
        left = under_way + max(0, total - waves - 1) * wave
        run = self.clock.run_left()
        run_left = f", run {rough_duration(left + run)} left" if run is not None else ""
        return f"{done} of {total * case.in_flight} proofs done; case {rough_duration(left)} left{run_left}"

    def finish(self) -> CaseResult:
        result = self.result
        result.wall_s = time.monotonic() - self._start
        result.windows = len(self._windows)
        result.stabilised, result.stability = stability(
            self._windows, self._latencies(), self.plan.stability_pct
        )
        return result


class Rounds(Protocol):
    """What pedantic's rounds run: a setup that builds the next timed wave (or ends them), and the wave."""

    def setup(self) -> tuple[tuple[Wave], dict[str, Any]]: ...

    def timed(self, wave: Wave) -> None: ...


def drive(rounds: Rounds, max_rounds: int, benchmark: Any | None) -> None:
    """Run ``rounds`` until their setup raises PlanDone, one pytest-benchmark round per wave when given."""
    if benchmark is not None:
        try:
            benchmark.pedantic(
                rounds.timed, setup=rounds.setup, rounds=max_rounds, iterations=1, warmup_rounds=0
            )
        except PlanDone:
            # pedantic marks a benchmark whose setup raised as failed (its JSON would drop it):
            # this was the plan ending the rounds, and every round that ran is whole.
            benchmark_whole(benchmark)
    # A disabled benchmark (e.g. under xdist) ran one wave and no more: run the rest here.
    while True:
        try:
            (wave,), _ = rounds.setup()
        except PlanDone:
            break
        rounds.timed(wave)


def run_case(
    case: Case,
    runner: Runner,
    plan: Plan,
    benchmark: Any | None,
    into: CaseResult | None = None,
    clock: CaseClock | None = None,
) -> CaseResult:
    """Run the case's plan, one pytest-benchmark round per wave when ``benchmark`` is given.

    ``into`` is filled as waves finish, and finished also when a wave raises: what a case
    that failed part-way measured before it failed. ``clock`` is the run's plan in time, for
    the estimates of the progress line.
    """
    measurement = Measurement(case, runner, plan, into, clock)
    line = runner.progress or ProgressLine(tty=False)
    try:
        with line.stage(f"{case.id}: proving"):
            runner.tick = lambda: line.tick(measurement.progress())
            drive(measurement, plan.max_waves(case.in_flight), benchmark)
    finally:
        measurement.finish()
    return measurement.result
