"""A/B in one run: a case measured on two daemons through the same minutes, their windows interleaved.

A host's speed drifts over minutes, so two runs made at different times cannot tell a slower
build from a slower hour; windows of the two builds taken in turn can, as randomized interleaved
trials do. The case runs in pairs, one window of each build; each pair's order is drawn from a
seeded generator in ABBA couples (two pairs in opposite orders), so neither build always goes
first and no periodic drift lines up with the order. The seed and the order are reported.

Side by side, both daemons are up and a pair is one window of each, their waves taken in turn
(one wave of the candidate, one of the control build, ...): the host's drift over a window's seconds
then moves both halves of a pair alike. Only one build proves at any moment, so neither build's
threads compete with the other's, and both run on the same CPUs: pinning each to its own half
would leave each half's speed (a GPU host's vCPUs change speed independently) in the ratio,
and measure each build on half the host it is meant for. In turn, used when the
host's memory cannot hold both (the control would need about the candidate's warm-up peak,
``MEMORY_HEADROOM`` times over), one daemon is up at a time, restarted and warmed up before
each block, and a pair is two adjacent blocks of ``BLOCK_WINDOWS`` windows: coarser, so a
restart's cost is spread over more proving.

After at least ``stats.FIRST_PAIRS`` pairs the pair stops once the gate is decided: the paired
change's 95% interval wholly beyond or wholly within the throughput limit of
``--cuzk-compare-fail``, or its half-width within ``stats.PRECISE_SHARE`` of it (±2.5% without a
limit), where the point estimate decides. The first pairs' spread sets that width (the first 6,
from the 12th pair the first 12, and so on: ``stats.paired_rate``), so a stretch of pairs that
happen to agree does not end a case early. Undecided, it measures
up to ``BUDGETS`` times ``--cuzk-case-budget``: on a busy 2-core runner pairs' ratios vary by
about 6%, so a change near the limit needs some 23 pairs (about 4 minutes) to become that
precise, and a cap of three budgets stopped most of them first, neither caught nor cleared.
Decided cases stop as soon as they are.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psutil

from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import METRICS, worse_interval
from pytest_cuzk.measure.paired import CANDIDATE, CONTROL, PairedAB
from pytest_cuzk.run.plan import Measurement, Plan, PlanDone, drive
from pytest_cuzk.run.tally import case_figures, case_samples
from pytest_cuzk.run.waves import CaseResult, Wave
from pytest_cuzk.vocab.units import plural

if TYPE_CHECKING:
    from pytest_cuzk.backends.protocol import DaemonBackend
    from pytest_cuzk.measure.memory import MemoryReport
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.execution import CaseHost

__all__ = ["BLOCK_WINDOWS", "MEMORY_HEADROOM", "choose_layout", "gate_decided", "measure_pair", "pair_orders"]

BLOCK_WINDOWS = 3
MEMORY_HEADROOM = 1.5
UNGATED_PRECISION = 2.5  # percent: pairs measured with no throughput limit stop at this half-width
BUDGETS = 8  # an undecided pair may measure this many case budgets: each build 4 single runs'
SIDE_BY_SIDE, IN_TURN = "side-by-side", "in-turn"


def pair_orders(seed: int) -> Iterator[str]:
    """Each pair's order, endlessly: ABBA couples, each couple's first order drawn from ``seed``."""
    rng = random.Random(seed)
    while True:
        first = rng.choice((CONTROL + CANDIDATE, CANDIDATE + CONTROL))
        yield first
        yield first[::-1]


def gate_decided(change: stats.PairedRatio | None, limit: float | None, precision: float) -> str:
    """Why the pairs so far decide the throughput gate, or "" while they do not.

    Decided: the first stage of pairs is in, and the change's interval lies wholly beyond or
    within ``limit``, or its half-width is within ``precision`` (where the point estimate decides).
    """
    if change is None or change.interval is None or change.pairs < stats.FIRST_PAIRS:
        return ""
    lo, hi = worse_interval(METRICS["throughput"], change.interval)
    pairs = plural(change.pairs, "pair")
    if limit is not None and (lo > limit or hi < limit):
        side = "beyond" if lo > limit else "within"
        return f"the paired change wholly {side} the {limit:g}% limit after {pairs}"
    if (hi - lo) / 2 <= precision:
        return f"the paired change within ±{(hi - lo) / 2:.1f}% after {pairs}"
    return ""


def choose_layout(asked: str, candidate: DaemonBackend, control: DaemonBackend, available: int) -> str:
    """Side by side where memory allows (or a daemon is not the plugin's to stop), else in turn.

    ``available`` is the host's free memory with the candidate up; the control is expected to
    need about the candidate's warm-up RSS peak.
    """
    owned = candidate.owned and control.owned
    if asked == IN_TURN and not owned:
        raise CuzkError(
            "--cuzk-ab-layout=in-turn needs daemons the plugin starts: an attached one cannot be stopped"
        )
    if asked != "auto":
        return asked
    peaks = [p for cold in candidate.state.cold for p in cold.warmup_rss_peak_bytes.values()]
    need = max(peaks, default=0) * MEMORY_HEADROOM
    return IN_TURN if owned and need > available else SIDE_BY_SIDE


@dataclass
class _Side:
    """One build of the pair: its daemon, its measurement once it ran, and its sampler's reports."""

    letter: str
    backend: DaemonBackend
    measurement: Measurement | None = None
    reports: list[MemoryReport] = field(default_factory=list)
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    up: bool = False  # its daemon is being sampled in this case
    turn_s: float = 0.0  # its own windows' wall time, the checks between its waves included

    @property
    def name(self) -> str:
        return "candidate" if self.letter == CANDIDATE else "control"

    def result(self) -> CaseResult | None:
        return self.measurement.result if self.measurement is not None else None

    def blocks(self, block: int) -> list[float]:
        """Seconds per proof of each complete block of ``block`` closed windows, in order."""
        m = self.measurement
        if m is None:
            return []
        samples, whole = case_samples(m.result), m.closed - m.closed % block
        seconds: dict[int, float] = {}
        proofs: dict[int, int] = {}
        for window, s, n in zip(samples.wave_window, samples.wave_s, samples.wave_size, strict=True):
            if window < whole:
                seconds[window // block] = seconds.get(window // block, 0.0) + s
                proofs[window // block] = proofs.get(window // block, 0) + n
        return [seconds[b] / proofs[b] for b in sorted(seconds) if proofs[b]]


class Interleaving:
    """The pair's rounds: each candidate wave is a pytest-benchmark round; the control's run in its setup."""

    def __init__(
        self,
        host: CaseHost,
        case: Case,
        plan: Plan,
        layout: str,
        seed: int,
        sides: list[_Side],
        limit: float | None = None,
    ) -> None:
        self.host, self.case, self.plan, self.layout, self.seed = host, case, plan, layout, seed
        self.sides = {side.letter: side for side in sides}
        self.block = BLOCK_WINDOWS if layout == IN_TURN else 1
        self.limit = limit
        self.precision = stats.PRECISE_SHARE * limit if limit else UNGATED_PRECISION
        self.orders: list[str] = []
        self.stop_reason = ""
        self.current: _Side | None = None  # the build proving now: a death or a hang is its daemon's
        self.start = time.monotonic()
        self._steps = self._candidate_waves()

    # --- pedantic's rounds --------------------------------------------------------------------------
    def setup(self) -> tuple[tuple[Wave], dict[str, Any]]:
        try:
            return (next(self._steps),), {}
        except StopIteration:
            raise PlanDone(self.stop_reason) from None

    def timed(self, wave: Wave) -> None:
        m = self.sides[CANDIDATE].measurement
        assert m is not None, "a candidate wave comes from its measurement"
        m.timed(wave)

    # --- the schedule -------------------------------------------------------------------------------
    def _candidate_waves(self) -> Iterator[Wave]:
        for order in pair_orders(self.seed):
            self.orders.append(order)
            if self.layout == IN_TURN:  # a restart between builds: each build's block in a row
                for letter in order:
                    yield from self._waves([self.sides[letter]])
            else:
                yield from self._waves([self.sides[letter] for letter in order])
            self.stop_reason = self.stop_reason or self._done()
            if self.stop_reason:
                return

    def _waves(self, sides: list[_Side]) -> Iterator[Wave]:
        """One wave of each of ``sides`` in turn, until each has closed ``block`` more windows.

        Waves, not windows, take turns: a pair's two halves then see the same seconds of the
        host, so its drift within a window (the GPU hosts' vCPUs change speed within seconds)
        moves both builds alike and cancels in the pair's ratio.
        """
        targets = {side.letter: self._turn(side).closed + self.block for side in sides}
        while not self._broken():
            due = [s for s in sides if s.measurement is not None and s.measurement.closed < targets[s.letter]]
            if not due:
                return
            for side in due:
                self.current, m, began = side, self._turn(side), time.monotonic()
                wave = Wave([m.runner.make_request() for _ in range(self.case.in_flight)])
                if side.letter == CANDIDATE:
                    yield wave  # timed by pedantic; checked when its next setup resumes here
                else:
                    m.timed(wave)
                m.settle()
                side.turn_s += time.monotonic() - began
                if self._broken():
                    return

    def _broken(self) -> bool:
        """A failed proof, or a build's maximum of proofs, ends the pair mid-window."""
        for side in self.sides.values():
            result = side.result()
            if result is not None and result.failed:
                self.stop_reason = f"a {side.name} proof failed"
            elif result is not None and len(result.proofs) >= self.plan.max_proofs:
                self.stop_reason = f"--cuzk-max-proofs {self.plan.max_proofs} reached"
        return bool(self.stop_reason)

    def _done(self) -> str:
        """Why the pair stops after the pairs so far, or "" to go on."""
        pairs, elapsed = len(self.orders), time.monotonic() - self.start
        results = [side.result() for side in self.sides.values()]
        if min(len(r.proofs) if r is not None else 0 for r in results) < self.plan.min_proofs:
            return ""
        if decided := gate_decided(self.change(), self.limit, self.precision):
            return decided
        cap = BUDGETS * self.plan.budget_s
        if elapsed + elapsed / pairs > cap:
            budget = f"{self.plan.budget_s:g} s time budget (--cuzk-case-budget)"
            return f"{BUDGETS} times the {budget} would be overrun"
        return ""

    def change(self) -> stats.PairedRatio | None:
        c, b = (self.sides[x].blocks(self.block) for x in (CANDIDATE, CONTROL))
        return stats.paired_rate(c, b)

    def _turn(self, side: _Side) -> Measurement:
        """The build's measurement, its daemon up; in turn, the other build's daemon stopped first."""
        if self.layout == IN_TURN and not side.up:
            for other in self.sides.values():
                if other is not side:
                    other.stack.close()
                    other.up = False
                    other.backend.stop()
        return self.open(side)

    def open(self, side: _Side) -> Measurement:
        """Bring the build's daemon up, warmed up, and sample it until its turn (or the case) ends."""
        from pytest_cuzk.run.execution import running

        if side.up:
            assert side.measurement is not None, "an open side has its measurement"
            return side.measurement
        case = self.case
        self.host.ready(side.backend.label, case.batch_size, [k.name for k in case.kinds])
        # Registered first, so it runs last: after the sampler's context has stopped it.
        side.stack.callback(lambda: side.reports.append(run.memory) if run.memory else None)
        run = side.stack.enter_context(
            running(self.host, side.backend, f"the {side.name}'s turn in {case.id}")
        )
        runner = run.runner(case.kind)
        runner.tick = lambda: self.host.progress.tick(self.progress())
        if side.measurement is None:
            side.measurement = Measurement(case, runner, self.plan)
        side.measurement.runner = runner
        side.up = True
        return side.measurement

    def close(self, error: BaseException | None = None) -> None:
        """Stop sampling both builds; ``error`` goes to the build proving when it came (``running``'s)."""
        current = self.current
        if error is not None and current is not None and current.up:
            current.up = False
            current.stack.__exit__(type(error), error, error.__traceback__)
        for side in self.sides.values():
            side.stack.close()
            side.up = False

    def progress(self) -> str:
        done = {s.name: len(r.proofs) if (r := s.result()) else 0 for s in self.sides.values()}
        pairs = f"pair {len(self.orders)} ({self.layout})"
        return f"{pairs}: {done['candidate']} candidate, {done['control']} control proofs"


def measure_pair(
    host: CaseHost,
    case: Case,
    plan: Plan,
    candidate: DaemonBackend,
    control: DaemonBackend,
    benchmark: Any | None,
) -> tuple[CaseResult, PairedAB]:
    """Both builds' proofs of ``case``, windows interleaved; the candidate's result and the pair's record."""
    s = host.settings
    seed = s.ab_seed if s.ab_seed is not None else random.SystemRandom().randrange(1, 2**31)
    layout = choose_layout(s.ab_layout, candidate, control, psutil.virtual_memory().available)
    sides = [_Side(CANDIDATE, candidate), _Side(CONTROL, control)]
    pair = Interleaving(host, case, plan, layout, seed, sides, s.compare_fail.get("throughput"))
    try:
        if layout == SIDE_BY_SIDE:  # the candidate is up (the test's fixture): the control beside it
            for side in sides:
                pair.open(side)
        with host.progress.stage(f"{case.id}: A/B proving"):
            drive(pair, plan.max_waves(case.in_flight), benchmark)
    except BaseException as exc:
        pair.close(exc)  # a hung daemon is killed, a dead one restarted: the one that was proving
        raise
    pair.close()
    results: dict[str, CaseResult] = {}
    for side in sides:
        if side.measurement is None:  # it never had a turn: the other build's first proof failed
            raise CuzkError(f"A/B: the {side.name} never ran ({pair.stop_reason})")
        results[side.letter] = result = side.measurement.finish()
        result.wall_s = side.turn_s  # not the other build's windows between its own
        result.memory = max(side.reports, key=lambda r: r.rss_effective_peak_bytes or 0, default=None)
        result.stop_reason = pair.stop_reason
    c, b = (pair.sides[x].blocks(pair.block) for x in (CANDIDATE, CONTROL))
    change = stats.paired_rate(c, b)
    record = PairedAB(
        control=case_figures(results[CONTROL], "", control.unsampled()),
        candidate_build=candidate.profile().identity(),
        control_build=control.profile().identity(),
        layout=layout,
        seed=seed,
        order=" ".join(pair.orders),
        windows_per_block=pair.block,
        log_ratios=tuple(round(math.log(x / y), 6) for x, y in zip(c, b, strict=False)),
        throughput_ratio=change.ratio if change else None,
        throughput_ratio_ci=change.interval if change else None,
        p_value=change.p_value if change else None,
        wall_s=round(time.monotonic() - pair.start, 3),
    )
    return results[CANDIDATE], record
