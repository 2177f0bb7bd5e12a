"""Whether a figure changed between two runs: the change, its 95% interval, its p-value, a verdict.

One module answers it for the pytest gate (``--cuzk-compare-fail``) and for ``cuzk-perf compare``.
A figure estimated from samples (throughput from the measurement windows, a latency percentile
from the proofs) regresses only when the change is beyond the limit and significant: its
estimator's test finds the two runs different (p < 0.05; Welch's t-test for throughput, the
Mann–Whitney U test for a percentile) and the 95% interval of the change lies wholly beyond the
limit. Measured in interleaved pairs (``--cuzk-ab``), where the host's drift cancels, a change
whose interval is within ``stats.PRECISE_SHARE`` of the limit is judged on its point estimate
instead. Beyond the limit but not significant is reported as such, and so is a change within the
limit whose interval reaches beyond it (undecided); neither fails unless
``--cuzk-compare-unresolved=fail`` asks that nothing undecided pass. A peak
(RSS, VRAM) is one value per run, the most the host had to hold, and is compared as measured.

Samples of one run say nothing of what changed between two runs on a shared host: when other
processes kept the host's CPUs busier during the new run than during the baseline (by more than
``BUSIER_PCT`` points), a slower figure is confounded with them, and is reported, not failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import Metric, Samples, regression, worse_interval
from pytest_cuzk.wire.units import plural

__all__ = ["BUSIER_PCT", "Change", "Side", "Undecided", "compare", "spread_warning"]

BUSIER_PCT = 10.0  # points of the host's CPUs other processes may add before a slowdown is theirs
Verdict = Literal["regressed", "not significant", "confounded", "undecided", "ok", "not comparable"]


@dataclass(frozen=True)
class Undecided:
    """What a compare gate does with what it cannot decide: warn, or fail (``--cuzk-compare-unresolved``).

    Undecided is a change beyond the limit that is not significant or is confounded, one within it
    whose interval reaches beyond it, a run whose interval is wider than the limit (unless its
    change is decided all the same), a figure missing on a side, too few A/B pairs or an A/B
    baseline whose proofs failed. On a noisy host a planted slow-down lands there, so a CI gate
    that lets nothing unmeasured pass fails it.
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
    """How much worse ``after`` is than ``before`` in one metric, with its uncertainty."""

    metric: Metric
    before: float | None
    after: float | None
    limit: float | None  # percent, as --cuzk-compare-fail takes it
    worse_pct: float | None  # the point estimate; negative is better
    ci_pct: tuple[float, float] | None = None  # 95% interval of worse_pct
    p_value: float | None = None
    tested: bool = False  # both sides had samples to test
    others_pct: tuple[float | None, float | None] = (None, None)  # before, after
    precise: bool = False  # measured in pairs to within stats.PRECISE_SHARE of the limit (an A/B case)

    @property
    def verdict(self) -> Verdict:
        if self.worse_pct is None:
            return "not comparable"
        if self.limit is None:
            return "ok"
        if self.worse_pct <= self.limit:
            reaches = self.ci_pct is not None and self.ci_pct[1] > self.limit and not self.precise
            return "undecided" if self.tested and reaches else "ok"
        if self.metric.sample is None:
            return "regressed"  # a peak: compared as measured
        significant = self.p_value is not None and self.p_value < stats.ALPHA
        beyond = self.ci_pct is not None and (self.ci_pct[0] > self.limit or self.precise)
        if not (self.tested and significant and beyond):
            return "not significant"
        return "confounded" if self.busier else "regressed"

    @property
    def busier(self) -> bool:
        """Other processes kept the host busier during the new run than during the baseline."""
        before, after = self.others_pct
        return before is not None and after is not None and after - before > BUSIER_PCT

    def signed(self, pct: float) -> float:
        """A "worse" percentage as the figure's own change: throughput 8% worse is -8%."""
        return -pct if self.metric.higher_is_better else pct

    def evidence(self, signed: bool = False) -> str:
        """``95% CI +9.8% to +16.5%, p=0.0003`` (as worse, or as the figure's change), or what stands in."""
        if self.metric.sample is None:
            return "a peak, compared as measured"
        if not self.tested:
            return "untested: a side has no per-proof samples (save a new baseline)"
        ci = "no interval"
        if self.ci_pct is not None:
            lo, hi = sorted(self.signed(b) for b in self.ci_pct) if signed else self.ci_pct
            ci = f"95% CI {lo:+.1f}% to {hi:+.1f}%"
        return f"{ci}, p={self.p_value:.2g}" if self.p_value is not None else ci

    def sentence(self, outcome: str = "not failed") -> str:
        """The gate's words for a change it fails or cannot decide; ``outcome`` ends an undecided one."""
        m, limit = self.metric, f"limit {self.limit:g}%"
        values = f"baseline {m.show(self.before)}, now {m.show(self.after)}"
        if self.verdict == "regressed":
            return f"{m.name} regressed {self.worse_pct:.1f}% ({self.evidence()}; {values}; {limit})"
        if self.verdict == "confounded":
            before, after = self.others_pct
            return (
                f"{m.name} {self.worse_pct:.1f}% worse ({self.evidence()}; {values}; {limit}), but other "
                f"processes kept {after:.0f}% of the host's CPUs busy during this run against {before:.0f}% "
                f"during the baseline: {outcome} (compare on a quiet host)"
            )
        if self.verdict == "undecided":
            return (
                f"{m.name} within the limit ({self.worse_pct:+.1f}% worse, {self.evidence()}; {values}; "
                f"{limit}), but its interval reaches beyond it: {outcome}"
            )
        return (
            f"{m.name} {self.worse_pct:.1f}% worse ({self.evidence()}; {values}; {limit}): "
            f"not significantly beyond the limit, {outcome}"
        )


def compare(metric: Metric, before: Side, after: Side, limit: float | None = None) -> Change:
    """The change from ``before`` to ``after``: of their figures, tested on the samples where both have them.

    The figures are each side's own (a run's recorded figure, what its summary printed; a pool's
    by ``perf.queries.figure``), never re-estimated from the samples: a throughput's windows hold
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


def spread_warning(metric: Metric, side: Side, limit: float) -> str | None:
    """Why a run cannot resolve a change of ``limit`` percent in ``metric``: its interval is wider."""
    xs = side.series(metric)
    if metric.estimator is None or side.value is None:
        return None
    half = stats.half_width_pct(xs, metric.estimator)
    if half is None or half <= limit:
        return None
    spread = stats.cv(xs)
    cv = f", CV {spread:.0%}" if spread is not None else ""
    return (
        f"{metric.name} spread too wide for a {limit:g}% gate: its 95% interval is ±{half:.1f}% of "
        f"{metric.show(side.value)} ({plural(len(xs), 'sample')}{cv}); measure longer "
        "(--cuzk-case-budget, --cuzk-proofs) or on a quieter host"
    )
