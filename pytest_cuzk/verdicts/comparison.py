"""Whether a figure changed between builds: the change, its 95% interval, its p-value, a verdict, in words.

One record, :class:`Change`, answers it for the pytest gates (``--cuzk-compare-fail`` against a
saved baseline or an A/B pair), the summary, the HTML report and ``cuzk-perf compare``.

Against a saved baseline (``against_saved``) the baseline is the mean of its build's saved runs on
this host, and the change's interval is the wider of two: the prediction interval of one more run
of that build (the host's run-to-run spread, ``runspread``) and the candidate's own 95% interval.
A change regresses only when that whole interval lies beyond the limit, is within it when the whole
interval is, and is otherwise undecided, never "regressed": drift the host has shown before is not
a regression, and a build twice as slow fails all the same.

Between two sets of samples (``compare``: an A/B pair's latencies, two builds' pooled runs in
``cuzk-perf compare``) a figure regresses only when beyond the limit and significant: its
estimator's test finds the two different (p < 0.05) and the 95% interval of the change lies wholly
beyond the limit. Measured in interleaved pairs (``--cuzk-ab``), where the host's drift cancels, a
change whose interval is within ``stats.PRECISE_SHARE`` of the limit is judged on its point
estimate instead. A peak (RSS, VRAM) is one value per run, the most the host had to hold, and is
compared as measured.

When the share of the host's CPUs other processes kept busy differs by more than ``BUSIER_PCT``
points between the two runs, either way, a change that would be decided is confounded with them,
and is reported, not failed: a baseline measured under load makes a slower build look unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scipy import stats as sps

from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import Figures, Metric, Samples, regression, worse_interval
from pytest_cuzk.verdicts.runspread import RunSpread, SavedRuns
from pytest_cuzk.vocab.units import plural

__all__ = ["BUSIER_PCT", "Change", "Side", "Undecided", "against_saved", "compare", "in_words"]

BUSIER_PCT = 10.0  # points of the host's CPUs other processes may add or take away between two runs
Verdict = Literal["regressed", "not significant", "confounded", "undecided", "ok", "not comparable"]
UNDECIDED: tuple[Verdict, ...] = ("not significant", "confounded", "undecided")


def in_words(worse_pct: float) -> str:
    """``7.1% better``, ``3.0% worse``: a change's direction in words, never a signed "worse"."""
    if round(abs(worse_pct), 1) == 0:
        return "unchanged"
    return f"{abs(worse_pct):.1f}% {'worse' if worse_pct > 0 else 'better'}"


def _interval_words(lo: float, hi: float) -> str:
    """``4.2% to 10.5% worse``, ``3.0% better to 1.2% worse``: an interval of a change, best end first."""
    if lo > 0 and round(lo, 1):
        return f"{lo:.1f}% to {in_words(hi)}"
    if hi < 0 and round(hi, 1):
        return f"{-hi:.1f}% to {in_words(lo)}"
    return f"{in_words(lo)} to {in_words(hi)}"


@dataclass(frozen=True)
class Undecided:
    """What a compare gate does with what it cannot decide: warn, or fail (``--cuzk-compare-unresolved``).

    Undecided is a change whose interval straddles the limit, one beyond the limit that is not
    significant, a confounded one, a figure missing on a side, too few A/B pairs or an A/B control build
    whose proofs failed. On a noisy host a planted slow-down lands there, so a CI gate that lets
    nothing unmeasured pass fails it.
    """

    strict: bool = False

    @property
    def outcome(self) -> str:
        """The words that end the sentence of an undecided change."""
        return "not decided" if self.strict else "not failed"

    def settle(self, notes: list[str]) -> tuple[list[str], list[str]]:
        """The undecided ``notes`` as (failures, warnings)."""
        if not self.strict:
            return [], notes
        return [f"{note}; failed (--cuzk-compare-unresolved=fail)" for note in notes], []


@dataclass(frozen=True)
class Side:
    """One run (or the pooled runs of one build): its figure and the samples it was estimated from."""

    value: float | None
    samples: Samples | None = None
    others_pct: float | None = None  # the share of the host's CPUs other processes kept busy

    def series(self, metric: Metric) -> list[float]:
        if metric.sample is None or self.samples is None:
            return []
        return self.samples.series(metric.sample)


@dataclass(frozen=True)
class Change:
    """How much worse ``after`` is than ``before`` in one metric, with its uncertainty and verdict."""

    metric: Metric
    before: float | None
    after: float | None
    limit: float | None  # percent, as --cuzk-compare-fail takes it
    worse_pct: float | None  # the point estimate; negative is better
    ci_pct: tuple[float, float] | None = None  # 95% interval of worse_pct
    p_value: float | None = None  # two-sided of no change; against a saved baseline, one-sided of the limit
    tested: bool = False  # both sides had samples to test (or a spread to judge by)
    others_pct: tuple[float | None, float | None] = (None, None)  # before, after
    precise: bool = False  # measured in pairs to within stats.PRECISE_SHARE of the limit (an A/B case)
    spread: RunSpread | None = None  # against a saved baseline: the run-to-run spread it was judged by
    runs: int = 1  # the baseline's runs its figure is the mean of
    own_pct: float | None = None  # the candidate's own 95% half-interval, percent
    before_name: str = "baseline"  # what ``before`` is: saved runs, or an A/B case's control build

    @property
    def verdict(self) -> Verdict:
        if self.worse_pct is None:
            return "not comparable"
        if self.limit is None:
            return "ok"
        if self.metric.sample is None:
            return "regressed" if self.worse_pct > self.limit else "ok"  # a peak: compared as measured
        if self.spread is not None and self.ci_pct is not None:
            lo, hi = self.ci_pct
            decided: Verdict = "regressed" if lo > self.limit else "ok" if hi <= self.limit else "undecided"
            return "confounded" if decided != "undecided" and self.confounded else decided
        if self.worse_pct <= self.limit:
            reaches = self.ci_pct is not None and self.ci_pct[1] > self.limit and not self.precise
            return "undecided" if self.tested and reaches else "ok"
        significant = self.p_value is not None and self.p_value < stats.ALPHA
        beyond = self.ci_pct is not None and (self.ci_pct[0] > self.limit or self.precise)
        if not (self.tested and significant and beyond):
            return "not significant"
        return "confounded" if self.confounded else "regressed"

    @property
    def confounded(self) -> bool:
        """Other processes kept the host busier, or quieter, during one run than during the other."""
        before, after = self.others_pct
        return before is not None and after is not None and abs(after - before) > BUSIER_PCT

    @property
    def undecided(self) -> bool:
        return self.verdict in UNDECIDED

    def signed(self, pct: float) -> float:
        """A "worse" percentage as the figure's own change: throughput 8% worse is -8%."""
        return -pct if self.metric.higher_is_better else pct

    def evidence(self, signed: bool = False) -> str:
        """``95% CI 9.8% to 16.5% worse, p=0.0003`` (``signed``: the figure's change), or what stands in."""
        if self.metric.sample is None:
            return "a peak, compared as measured"
        if not self.tested:
            return "untested: a side has no per-proof samples (save a new baseline)"
        ci = "no interval"
        if self.ci_pct is not None and signed:
            lo, hi = sorted(self.signed(b) for b in self.ci_pct)
            ci = f"95% CI {lo:+.1f}% to {hi:+.1f}%"
        elif self.ci_pct is not None:
            ci = f"95% CI {_interval_words(*self.ci_pct)}"
        if self.p_value is not None:
            ci += f", p={self.p_value:.2g}" + (" (one-sided, beyond the limit)" if self.spread else "")
        if self.spread is None:
            return ci
        own = "" if self.own_pct is not None else "; this run has no interval of its own"
        if self.own_wider:
            own = f"; this run's own interval, ±{self.own_pct:.1f}%, is the wider"
        return f"{ci}; {self.spread.describe()}{own}"

    @property
    def own_wider(self) -> bool:
        """The candidate's own interval, not the host's spread, is what leaves the change undecided."""
        spread, own = self.spread, self.own_pct
        return spread is not None and own is not None and own > spread.half_width_pct(self.runs)

    def sentence(self, outcome: str = "not failed") -> str:
        """The change in words, with its evidence and verdict; ``outcome`` ends an undecided one."""
        m = self.metric
        if self.worse_pct is None:
            return f"{m.name} not compared: no figure in the {self.before_name} or now"
        mean = f" (mean of {plural(self.runs, 'run')})" if self.runs > 1 else ""
        values = f"{self.before_name} {m.show(self.before)}{mean}, now {m.show(self.after)}"
        limit = f"; limit {self.limit:g}%" if self.limit is not None else ""
        verdict = self.verdict
        head = f"regressed {self.worse_pct:.1f}%" if verdict == "regressed" else in_words(self.worse_pct)
        said = f"{m.name} {head} ({self.evidence()}; {values}{limit})"
        if verdict == "regressed":
            return said
        if verdict == "ok":
            return f"{said}: within the limit" if self.limit is not None else said
        if verdict == "confounded":
            before, after = self.others_pct
            return (
                f"{said}, but other processes kept {after:.0f}% of the host's CPUs busy during this run "
                f"against {before:.0f}% during the baseline: undecided, {outcome} (compare on a quiet host)"
            )
        if verdict == "undecided" and self.spread is not None:
            longer = ", measure longer (--cuzk-case-budget)" if self.own_wider else ""
            return (
                f"{said}: its interval straddles the limit: undecided, {outcome} (save the baseline again "
                f"at another hour to learn this host's spread{longer}, or measure both builds in one run "
                "with --cuzk-ab)"
            )
        if verdict == "undecided":
            return f"{said}: within the limit, but its interval reaches beyond it: undecided, {outcome}"
        return f"{said}: not significantly beyond the limit, {outcome}"


def compare(metric: Metric, before: Side, after: Side, limit: float | None = None) -> Change:
    """The change from ``before`` to ``after``: of their figures, tested on the samples where both have them.

    The figures are each side's own (a run's recorded figure, what its summary printed; a pool's
    by ``fleet.queries.figure``), never re-estimated from the samples: a throughput's windows hold
    unequal numbers of proofs, so their mean rate is not the run's proofs over its timed seconds.
    The samples give the interval of the change and its test.
    """
    others = (before.others_pct, after.others_pct)
    b, a = before.value, after.value
    if b is None or a is None:
        return Change(metric, b, a, limit, None, others_pct=others)
    worse = regression(metric, b, a)
    xs, ys = before.series(metric), after.series(metric)
    tested = metric.estimator is not None and min(len(xs), len(ys)) >= stats.MIN_INTERVAL_SAMPLES
    if not tested or metric.estimator is None:
        return Change(metric, b, a, limit, worse, others_pct=others)
    ratio, p = metric.estimator.ratio(xs, ys)
    ci = worse_interval(metric, ratio) if ratio is not None else None
    return Change(metric, b, a, limit, worse, ci, p, tested=True, others_pct=others)


def against_saved(metric: Metric, saved: SavedRuns, now: Figures, limit: float) -> Change:
    """The change from the baseline build's saved runs (their mean) to ``now``, judged by the host's spread.

    Its interval is the point change ± the wider of the prediction interval for one more run of the
    baseline build and ``now``'s own 95% interval; its p-value, from the same t, is one-sided: that
    the change is beyond the limit.
    """
    before, after = saved.value(metric), metric.value(now)
    runs = len(saved.values(metric))
    others = (saved.others_pct, now.memory.host_other_cpu_pct if now.memory is not None else None)
    worse = regression(metric, before, after)
    if worse is None or metric.sample is None or metric.estimator is None:
        return Change(metric, before, after, limit, worse, others_pct=others, runs=max(runs, 1))
    spread = saved.spread(metric)
    own = stats.half_width_pct(now.samples.series(metric.sample), metric.estimator)
    width = max(spread.half_width_pct(runs), own or 0.0)
    scale = width / spread.quantile()
    beyond = (worse - limit) / scale if scale else math.copysign(math.inf, worse - limit)
    p = float(sps.t.sf(beyond, spread.df))
    ci = (worse - width, worse + width)
    return Change(
        metric, before, after, limit, worse, ci, p, True, others, spread=spread, runs=runs, own_pct=own
    )
